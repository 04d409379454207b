import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { soonMachine, timersMachine, twelveSecondsMachine } from './fixtures/instance-machines.js';
import { eventually, sleep } from './helpers/eventually.js';
import { removeDir, startNode, tempDataDir, testDeployment } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { eventType } from './helpers/transitions.js';

const eventTypes = async (client: StateBackedClient, machine: string, instance: string) =>
  (await client.machineInstances.listTransitions(machine, instance)).transitions.map(eventType);

// The two nodes below share nothing: their subtests run side by side (most of their time is waiting for delays).
t.jobs = 2;

/** One node with a short settling budget (delays are left to the durable timers) and quick timer retries. */
t.test('a node with a 100 ms settling budget and 150 ms timer retries', async (t) => {
  const node = await startNode({ args: ['--settle-timeout-ms', '100', '--timer-retry-ms', '150'] });
  t.teardown(() => node.stop());

  t.test('a delay beyond the settle budget fires by itself, and cancel cancels', async (t) => {
    // Four instances side by side, each with its timer: one wait covers them all (each still gets at
    // least the time it had when they ran one after another).
    const { operator } = await machineWithVersion(node, 'timers', timersMachine);
    await operator.machineInstances.create('timers', { slug: 'a' });
    t.equal((await operator.machineInstances.sendEvent('timers', 'a', { event: 'SLEEP' })).state, 'sleeping');
    const aSlept = Date.now();

    await operator.machineInstances.create('timers', { slug: 'b' });
    await operator.machineInstances.sendEvent('timers', 'b', { event: 'ARM' });
    t.equal((await operator.machineInstances.sendEvent('timers', 'b', { event: 'CANCEL' })).state, 'idle');

    await operator.machineInstances.create('timers', { slug: 'c' });
    await operator.machineInstances.sendEvent('timers', 'c', { event: 'ARM' });

    // Deleting an instance deletes its timers: a new instance of the same name sees no ghost event.
    await operator.machineInstances.create('timers', { slug: 'd' });
    await operator.machineInstances.sendEvent('timers', 'd', { event: 'ARM' });
    await operator.machineInstances.dangerously.delete('timers', 'd', { dangerDataWillBeDeletedForever: true });
    await operator.machineInstances.create('timers', { slug: 'd' });

    // 1.8 s after a's SLEEP (its delay is 1.5 s), and 0.7 s after the last of the others (theirs is 0.4 s).
    await sleep(Math.max(aSlept + 1800, Date.now() + 700) - Date.now());
    t.equal((await operator.machineInstances.get('timers', 'a')).state, 'awake', 'no request was needed');
    t.same(
      await eventTypes(operator, 'timers', 'a'),
      ['xstate.init', 'SLEEP', 'xstate.after(1500)#timers.sleeping'],
      'the timer is an ordinary history entry',
    );
    t.same(await eventTypes(operator, 'timers', 'b'), ['xstate.init', 'ARM', 'CANCEL'], 'a cancelled delayed send never fires');
    const pinged = await operator.machineInstances.admin.get('timers', 'c');
    t.equal(pinged.state, 'pinged', 'an uncancelled delayed send fires');
    t.equal(pinged.context.pings, 1, 'exactly once');
    t.same(await eventTypes(operator, 'timers', 'd'), ['xstate.init']);
  });

  t.test('a paused instance does not fire; after the retries the drop is logged', async (t) => {
    const { operator } = await machineWithVersion(node, 'paused', timersMachine);
    await operator.machineInstances.create('paused', { slug: 'p' });
    await operator.machineInstances.sendEvent('paused', 'p', { event: 'ARM' });
    await operator.machineInstances.dangerously.setStatus('paused', 'p', { status: 'paused' });
    // PING is due 400 ms after ARM; 5 retries 150 ms apart, then the drop (≈ 1.3 s).
    const logLines = async () =>
      (await operator.logs.retrieve(new Date(Date.now() - 60_000), { machineName: 'paused', instanceName: 'p' })).logs.map((l) => l.log);
    await eventually(async () => (await logLines()).some((l) => /dropped delayed event PING/.test(l)), {
      intervalMs: 200,
      message: 'the delayed event was not dropped',
    }).catch(() => undefined);
    await operator.machineInstances.dangerously.setStatus('paused', 'p', { status: 'running' });
    await sleep(500);
    t.equal((await operator.machineInstances.get('paused', 'p')).state, 'armed', 'the event was never delivered');
    const lines = await logLines();
    t.equal(lines.filter((l) => /could not deliver delayed event PING/.test(l)).length, 5, 'five retries were logged');
    t.ok(
      lines.some((l) => /dropped delayed event PING after 6 failed deliveries: the instance is paused/.test(l)),
      'then the drop, with why',
    );
  });

  t.test('a delayed event that fails on the version an upgrade just committed is retried, counted and dropped', async (t) => {
    const { operator } = await machineWithVersion(node, 'upgrading', timersMachine);
    // v2: the same machine, except that PING throws (the delayed event pending from v1 fails there)
    const v2 = timersMachine.replace(
      'PING: { target: "pinged",',
      'PING: { target: "pinged", cond: () => { console.log("v2 tries PING"); throw new Error("v2 refuses PING"); },',
    );
    t.not(v2, timersMachine);
    const versions = (await operator.machineVersions.list('upgrading')).versions;
    const v1Id = versions[0]?.id as string;
    const { machineVersionId: v2Id } = await operator.machineVersions.create('upgrading', { clientInfo: 'v2', code: v2 });
    await operator.machineVersionMigrations.create('upgrading', {
      fromMachineVersionId: v1Id,
      toMachineVersionId: v2Id,
      code: 'export const upgradeState = (path) => path; export const upgradeContext = (oldPaths, newPaths, context) => context;',
    });
    await operator.machineInstances.create('upgrading', { slug: 'u' });
    await operator.machineInstances.sendEvent('upgrading', 'u', { event: 'ARM' });
    await operator.machineInstances.admin.updateDesiredVersion('upgrading', 'u', { targetMachineVersionId: v2Id });
    // PING is due 400 ms after ARM: the upgrade commits as it fires, then v2 fails it; 5 retries 150 ms apart
    let lines: string[] = [];
    for (let i = 0; i < 40 && !lines.some((l) => /dropped delayed event PING after 6 failed deliveries/.test(l)); i++) {
      await sleep(250);
      lines = (await operator.logs.retrieve(new Date(Date.now() - 60_000), { machineName: 'upgrading', instanceName: 'u' })).logs.map(
        (l) => l.log,
      );
    }
    t.ok(
      lines.some((l) => /could not deliver delayed event PING \(attempt 1\): .*v2 refuses PING/.test(l)),
      'the first failure is counted',
    );
    t.ok(
      lines.some((l) => /dropped delayed event PING after 6 failed deliveries/.test(l)),
      'and after the retries the drop is logged',
    );
    t.equal(lines.filter((l) => /v2 tries PING/.test(l)).length, 6, 'six deliveries were tried: none went uncounted');
    const view = await operator.machineInstances.admin.get('upgrading', 'u');
    t.match(view, { state: 'armed', machineVersion: { id: v2Id } }, 'the upgrade stays; the event was never taken');
  });
});

/**
 * One node with a 1 s settling budget: the logs test runs first on it (it reads all of the org's logs),
 * the restart test last (it kills the node and starts it again on its data dir).
 */
t.test('a node with a 1 s settling budget', async (t) => {
  const dataDir = tempDataDir();
  const args = ['--settle-timeout-ms', '1000'];
  let node = await startNode({ dataDir, args });
  t.teardown(async () => {
    await node.stop();
    removeDir(dataDir);
  });

  t.test('logs: console output of machine code, filtered, with watch-friendly maxTimestamp', async (t) => {
    const { operator, machineVersionId } = await machineWithVersion(node, 'talky', timersMachine);
    const from = new Date(Date.now() - 1000);
    await operator.machineInstances.create('talky', { slug: 'x' });
    await operator.machineInstances.create('talky', { slug: 'y' });
    await operator.machineInstances.sendEvent('talky', 'x', { event: { type: 'LOG', n: 1 } });
    await operator.machineInstances.sendEvent('talky', 'y', { event: { type: 'LOG', n: 2 } });
    const all = await eventually(
      async () => {
        const retrieved = await operator.logs.retrieve(from);
        return retrieved.logs.length >= 4 && retrieved;
      },
      { message: 'the four lines were not logged' },
    ).catch(() => operator.logs.retrieve(from));
    t.equal(all.logs.length, 4);
    const first = all.logs[0];
    t.match(first, { orgId: /^org_/, machineName: 'talky', instanceName: 'x', machineVersionId, outputType: 'stdout', timestamp: String });
    t.same(JSON.parse((first?.log ?? '').replace(/^structured /, '')), { n: 1, nested: { ok: true } }, 'structured objects stay JSON');
    t.equal(all.logs[1]?.outputType, 'stderr');
    t.equal(all.logs[1]?.log, 'bad thing 1');

    const base = `${node.url}/logs`;
    const get = async (query: string) =>
      (await fetch(`${base}?${query}`, { headers: { authorization: `Bearer ${node.adminKey}` } })).json() as Promise<any>;
    // On a cluster the proxy may ask a node that has not yet applied the LOGS batch the lines above
    // came from (wire-protocol §3.6 allows fewer entries): each filtered read waits until it sees them.
    const twoEntries = <T extends { logs: unknown[] }>(read: () => Promise<T>) =>
      eventually(async () => {
        const page = await read();
        return page.logs.length >= 2 && page;
      }).catch(read);
    const viaClient = await twoEntries(() => operator.logs.retrieve(from, { machineName: 'talky', instanceName: 'y', machineVersionId }));
    t.same(
      viaClient.logs.map((l) => l.instanceName),
      ['y', 'y'],
      "the client's filters reach the server",
    );
    const onlyY = await twoEntries(() => get(`from=${from.toISOString()}&instance=y`));
    t.same(
      onlyY.logs.map((l: { instanceName: string }) => l.instanceName),
      ['y', 'y'],
    );
    t.equal((await get(`from=${from.toISOString()}&version=ver_AAAAAAAAAAAAAAAAAAAAAA`)).logs.length, 0);
    const again = await get(`from=${encodeURIComponent(all.maxTimestamp)}`);
    t.same(again.logs, [], 'continuing from maxTimestamp repeats nothing');
    t.equal(again.maxTimestamp, all.maxTimestamp, 'with nothing new, maxTimestamp echoes from exactly');

    for (const from of ['yesterday', '0', 'May%201%202026', '2026-02-30T00:00:00Z', '2026-04-31T12:00:00.000Z', '2026-13-01T00:00:00Z']) {
      const bad = await fetch(`${base}?from=${from}`, { headers: { authorization: `Bearer ${node.adminKey}` } });
      t.equal(bad.status, 400, `from=${from}: 400`);
    }
    const leapDay = await fetch(`${base}?from=2028-02-29T00:00:00Z`, { headers: { authorization: `Bearer ${node.adminKey}` } });
    t.equal(leapDay.status, 200, 'a leap day is a day');
    const missing = await fetch(base, { headers: { authorization: `Bearer ${node.adminKey}` } });
    t.equal(missing.status, 400);

    await operator.machineInstances.create('talky', { slug: 'grumpy' });
    await t.rejects(
      operator.machineInstances.get('talky', 'grumpy'),
      { status: 403, code: 'rejected-by-machine-authorizer' },
      'a throwing authorizer refuses',
    );
    const grumpyLogs = () => operator.logs.retrieve(from, { machineName: 'talky', instanceName: 'grumpy' });
    const grumpy = await eventually(
      async () => {
        const retrieved = await grumpyLogs();
        return retrieved.logs.length > 0 && retrieved;
      },
      { message: 'the throw was not logged' },
    ).catch(grumpyLogs);
    t.match(
      grumpy.logs,
      [{ machineName: 'talky', instanceName: 'grumpy', outputType: 'stderr', log: /allowRead threw: Error: no reads for grumpy/ }],
      'and the throw is logged under its machine and instance',
    );

    const iterator = operator.logs.watch(from)[Symbol.asyncIterator]();
    const watched = await iterator.next();
    t.equal(watched.done, false);
    t.match(watched.value, { machineName: 'talky' }, 'logs.watch yields entries');
    await iterator.return?.();
  });

  t.test('delayed events do not hold answers; each gets its own history record, also one due while a child runs', async (t) => {
    const code = `import { createMachine, assign, send } from 'npm:xstate';
  export default createMachine({ id: 'pings', initial: 'a', predictableActionArguments: true, context: { pings: [] }, states: {
    a: { after: { 200: 'b' } },
    b: { on: {
      SCHED: { actions: send((c, e) => ({ type: 'PING', id: e.id }), { delay: (c, e) => e.delay }) },
      MANY: { actions: [1, 2, 3, 4, 5].map((n) => send({ type: 'PING', id: 'm' + n }, { delay: 300 + n * 60 })) },
      PING: { actions: assign({ pings: (c, e) => [...c.pings, e.id] }) },
      WORK: 'working',
    } },
    working: {
      invoke: { src: () => new Promise((resolve) => setTimeout(resolve, 600)), onDone: 'b' },
      after: { 200: { actions: assign({ pings: (c) => [...c.pings, 'during'] }) } },
    },
  } });
  export const allowRead = () => true;
  export const allowWrite = () => true;`;
    const { operator } = await machineWithVersion(node, 'pings', code);
    type Transition = { event: { type: string; id?: string }; state: unknown };
    const transitions = async (count: number) => {
      let got: Transition[] = [];
      for (const until = Date.now() + 10_000; got.length < count && Date.now() < until; await sleep(100)) {
        got = (await operator.machineInstances.listTransitions('pings', 'x')).transitions as Transition[];
      }
      return got;
    };
    t.equal((await operator.machineInstances.create('pings', { slug: 'x' })).state, 'a', 'the create answers before its 200 ms delay');
    t.same(
      (await transitions(2)).map((tr) => [tr.event.type, tr.state]),
      [
        ['xstate.init', 'a'],
        ['xstate.after(200)#pings.a', 'b'],
      ],
      'the durable timers delivered it, with a record of its own',
    );
    // A is due after B's SCHED was answered, B after A: each fires from the durable timers.
    await operator.machineInstances.sendEvent('pings', 'x', { event: { type: 'SCHED', id: 'A', delay: 300 } });
    await operator.machineInstances.sendEvent('pings', 'x', { event: { type: 'SCHED', id: 'B', delay: 500 } });
    const scheduled = await transitions(6);
    t.same(
      scheduled.map((tr) => tr.event.type),
      ['xstate.init', 'xstate.after(200)#pings.a', 'SCHED', 'SCHED', 'PING', 'PING'],
    );
    t.same(
      scheduled.slice(4).map((tr) => tr.event.id),
      ['A', 'B'],
      'one record for each delayed event',
    );
    t.same((await operator.machineInstances.admin.get('pings', 'x')).context.pings, ['A', 'B']);

    // Five delayed events from one step (the first 360 ms after it): the answer at once, then five records, in order.
    await operator.machineInstances.sendEvent('pings', 'x', { event: 'MANY' });
    t.same((await operator.machineInstances.admin.get('pings', 'x')).context.pings, ['A', 'B'], 'answered before any of them fired');
    t.same(
      (await transitions(12)).slice(6).map((tr) => [tr.event.type, tr.event.id]),
      [
        ['MANY', undefined],
        ['PING', 'm1'],
        ['PING', 'm2'],
        ['PING', 'm3'],
        ['PING', 'm4'],
        ['PING', 'm5'],
      ],
    );

    // A child still running holds the answer (settling), and a delayed event due meanwhile fires in the
    // step, recorded as an event of its own.
    const worked = await operator.machineInstances.sendEvent('pings', 'x', { event: 'WORK' });
    t.equal(worked.state, 'b', 'answered once the child finished');
    const afterWork = (await transitions(14)).slice(12);
    t.same(
      afterWork.map((tr) => [tr.event.type, tr.state]),
      [
        ['WORK', 'working'],
        ['xstate.after(200)#pings.working', 'b'],
      ],
    );
    t.same(((await operator.machineInstances.admin.get('pings', 'x')).context.pings as string[]).slice(-1), ['during']);
  });

  t.test('a 12 s delay fires on time after the node is killed with SIGKILL and restarted', async (t) => {
    const adminKey = node.adminKey as string;
    const first = node;
    const { operator } = await machineWithVersion(first, 'twelve', twelveSecondsMachine);
    t.equal((await operator.machineInstances.create('twelve', { slug: 't' })).state, 'waiting');
    // The delay counts from the node's clock when the instance started, which its first record carries
    // (the request itself may have waited for a sandbox worker to start).
    const created = Date.parse((await operator.machineInstances.listTransitions('twelve', 't')).transitions[0]?.createdAt ?? '');
    // Instances whose log holds five heads, each with a delayed event that the next one moved on, the
    // last one due after the kill: only that one may run, once, whichever node fires it (a cluster's
    // first node up owns every partition for a moment, and fired the delayed events of the heads it
    // was replaying, long past: their code ran, and their commits failed).
    const soon = ['s0', 's1', 's2', 's3', 's4', 's5'];
    await operator.machines.create('soon');
    await operator.machineVersions.create('soon', { clientInfo: 'soon-v1', makeCurrent: true, code: soonMachine });
    await Promise.all(soon.map((slug) => operator.machineInstances.create('soon', { slug })));
    for (let bump = 0; bump < 5; bump++)
      await Promise.all(soon.map((slug) => operator.machineInstances.sendEvent('soon', slug, { event: 'BUMP' })));
    const soonDue = Date.now() + 5_000;
    await sleep(2000);
    t.equal(await first.stop('SIGKILL'), 'SIGKILL');
    // (the last head's delayed event must come due after the kill, so that only the restarted node can
    // run it: a 2.5 s delay once fired before a loaded CI host's cluster was down, and its log line,
    // not yet flushed, died with it)
    const killedBeforeDue = Date.now() < soonDue - 200;
    if (!killedBeforeDue) t.comment('the kill came too late for the soon instances: their log lines are not checked');
    node = await startNode({ dataDir, args: [...args, '--admin-key', adminKey], generatedAdminKey: true });
    const second = node;
    // (a cluster deployment restarts three nats-servers and three nodes: should that outlast the delay,
    // the timer is due at once when they are back)
    // A cluster's overdue timers fire once their owner has loaded the instance, 2–7 s after its nodes
    // answer again on a 2-core host (cluster/README.md, What is left; 5.6 s seen in CI): allowed for
    // here, not hidden.
    const clusterGrace = testDeployment === 'cluster' ? 8_000 : 0;
    const backLate = Math.max(0, Date.now() - (created + 12_000)) + clusterGrace;
    const client = new StateBackedClient(adminKey, { apiHost: second.url });
    if (Date.now() < created + 12_000) {
      await sleep(Math.max(0, created + 12_000 - Date.now() - 300));
      const { state } = await client.machineInstances.get('twelve', 't');
      // A read that answers after the due time may see it fired (a cold cluster's first read takes
      // seconds): the fired record's own time, checked below, says whether it was early.
      if (Date.now() < created + 12_000) t.equal(state, 'waiting', 'not early');
    }
    // (no read of the instance meanwhile: it loads the instance, which would fire an overdue timer
    // itself; its history is read from the store)
    await eventually(async () => (await client.machineInstances.listTransitions('twelve', 't')).transitions.length >= 2, {
      timeoutMs: 800 + clusterGrace,
      intervalMs: 100,
    }).catch(() => undefined);
    const done = await client.machineInstances.get('twelve', 't');
    t.equal(done.state, 'done', 'it moved on by itself');
    const fired = (await client.machineInstances.listTransitions('twelve', 't')).transitions.at(-1);
    const late = Date.parse(fired?.createdAt ?? '') - (created + 12_000);
    t.ok(late >= 0 && late < 500 + backLate, `fired ${late} ms after its due time (the node was back ${backLate} ms after it)`);
    for (const slug of soon) {
      await eventually(async () => (await client.machineInstances.get('soon', slug)).state === 'done', {
        timeoutMs: 10_000,
        intervalMs: 200,
      });
      const firedLines = async () =>
        (await client.logs.retrieve(new Date(created - 60_000), { machineName: 'soon', instanceName: slug })).logs
          .map((l) => l.log.trim())
          .filter((line) => line.startsWith('fired'));
      // (logs are stored in batches, and on a cluster travel through the LOGS stream)
      await eventually(async () => (await firedLines()).length > 0, { timeoutMs: 5_000, intervalMs: 100 }).catch(() => undefined);
      await sleep(300);
      if (killedBeforeDue)
        t.same(await firedLines(), ['fired 5'], `${slug}: the last head's delayed event ran, once; none of the heads before`);
    }
  });
});
