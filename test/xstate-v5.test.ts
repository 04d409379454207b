/**
 * XState v5 machines through a real `statehold serve` and the real @statebacked/client, proving the
 * behaviour the v4 tests prove for v4 machines: create/send/read, authorizers, settling with an
 * invoked promise (and a fetch in it), the settle timeout's xstate.error.actor event before the next
 * event, durable timers (firing by themselves, cancelled by id, after a SIGKILL and restart), final
 * states, persistent children and messages, console logs, bundled v5 copies, refused bundles.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errors, StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { removeDir, startNode, tempDataDir, testDeployment } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { eventType } from './helpers/transitions.js';
import { bundled5, child5, importing5, parent5, shop5, timers5 } from './fixtures/xstate-v5/machines.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const types = async (client: StateBackedClient, machine: string, instance: string) =>
  (await client.machineInstances.listTransitions(machine, instance)).transitions.map(eventType);

const seen: string[] = [];
const server = createServer((req, res) => {
  seen.push(String(req.headers['x-from']));
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ price: 7 }));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
const port = (server.address() as AddressInfo).port;

const node = await startNode({ args: ['--settle-timeout-ms', '1500', '--fetch-allow', `127.0.0.1:${port}`] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const as = (sub: string) => new StateBackedClient(admin, { apiHost: node.url, actAs: { sub } });

// The restart test has a node of its own and runs beside the others, which share one node and run in
// turn (its 10 s delay is mostly waiting).
t.jobs = 2;

t.test('an after delay fires on time after the node is killed with SIGKILL and restarted', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const args = ['--admin-key', 'v5-timer-admin', '--settle-timeout-ms', '500'];
  const first = await startNode({ dataDir, args, generatedAdminKey: true });
  const { operator } = await machineWithVersion({ ...first, adminKey: 'v5-timer-admin' }, 'after5', importing5(timers5(10_000)));
  t.equal((await operator.machineInstances.create('after5', { slug: 't' })).state, 'waiting');
  // The delay counts from the node's clock when the instance started, which its first record carries;
  // 10 s leave a loaded machine time to restart the node before it is due.
  const created = Date.parse((await operator.machineInstances.listTransitions('after5', 't')).transitions[0]?.createdAt ?? '');
  await sleep(500);
  t.equal(await first.stop('SIGKILL'), 'SIGKILL');
  const second = await startNode({ dataDir, args, generatedAdminKey: true });
  t.teardown(() => second.stop());
  const client = new StateBackedClient('v5-timer-admin', { apiHost: second.url });
  // (a cluster deployment restarts three nats-servers and three nodes, which may outlast the delay:
  // then it is due at once, and fires once the owner has loaded it, some seconds after they answer)
  const backLate = Math.max(0, Date.now() - (created + 10_000)) + (testDeployment === 'cluster' ? 5_000 : 0);
  if (Date.now() < created + 10_000) {
    await sleep(Math.max(0, created + 10_000 - Date.now() - 300));
    const { state } = await client.machineInstances.get('after5', 't');
    // A read that answers after the due time may see it fired: the fired record's time says if it was early.
    if (Date.now() < created + 10_000) t.equal(state, 'waiting', 'not early');
  }
  await sleep(testDeployment === 'cluster' ? 5_800 : 800);
  t.match(await client.machineInstances.get('after5', 't'), { state: 'expired', done: true }, 'it moved on by itself');
  const fired = (await client.machineInstances.listTransitions('after5', 't')).transitions.at(-1);
  t.equal(fired && eventType(fired), 'xstate.after.10000.timers.waiting');
  const late = Date.parse(fired?.createdAt ?? '') - (created + 10_000);
  t.ok(late >= 0 && late < 500 + backLate, `fired ${late} ms after its due time (the node was back ${backLate} ms after it)`);
});

t.test('on one node with a 1.5 s settling budget', async (t) => {
  t.test('create, send and read a v5 machine (xstate@5 import): authorizers, settling with a fetch, final state, logs', async (t) => {
    const { operator } = await machineWithVersion(node, 'shop5', shop5(`http://127.0.0.1:${port}/price`));
    const alice = as('alice');
    const bob = as('bob');
    t.match(await alice.machineInstances.create('shop5', { slug: 'a', context: { owner: 'alice' } }), {
      state: 'open',
      done: false,
      publicContext: undefined,
    });
    await t.rejects(
      bob.machineInstances.create('shop5', { slug: 'b', context: { owner: 'alice' } }),
      errors.RejectedByMachineAuthorizerError,
      'allowWrite initialization',
    );
    await t.rejects(bob.machineInstances.get('shop5', 'a'), errors.RejectedByMachineAuthorizerError, 'allowRead');
    await t.rejects(
      bob.machineInstances.sendEvent('shop5', 'a', { event: 'ADD' }),
      errors.RejectedByMachineAuthorizerError,
      'allowWrite event',
    );
    await t.rejects(
      alice.machineInstances.sendEvent('shop5', 'a', { event: 'FORBIDDEN' }),
      errors.RejectedByMachineAuthorizerError,
      'allowWrite sees the event',
    );
    await alice.machineInstances.sendEvent('shop5', 'a', { event: 'ADD' });
    await alice.machineInstances.sendEvent('shop5', 'a', { event: 'ADD' });
    const paid = await alice.machineInstances.sendEvent('shop5', 'a', { event: 'CHECKOUT' });
    t.match(paid, { state: 'paid', done: true }, 'the request waited for the invoked promise and its fetch');
    t.same(seen, ['v5'], 'the fetch reached the allowed server');
    const full = await operator.machineInstances.admin.get('shop5', 'a');
    t.same(full.context, { owner: 'alice', items: 2, total: 14 });
    t.same(await types(operator, 'shop5', 'a'), ['xstate.init', 'ADD', 'ADD', 'CHECKOUT'], 'the promise settled within the request');
    t.match(await alice.machineInstances.get('shop5', 'a'), { state: 'paid', done: true });
    let logs: string[] = [];
    for (const until = Date.now() + 5_000; logs.length < 2 && Date.now() < until; await sleep(200)) {
      logs = (await operator.logs.retrieve(new Date(Date.now() - 60_000), { machineName: 'shop5', instanceName: 'a' })).logs.map(
        (l) => l.log,
      );
    }
    t.equal(logs.length, 2, 'console output of v5 actions is captured');
    t.match(logs[1], /added .*"items":2/);
  });

  t.test(
    'a child that does not settle is stopped at the settle timeout; xstate.error.actor.<id> comes before the next event',
    async (t) => {
      const alice = as('alice');
      const { operator } = await machineWithVersion(node, 'hang5', shop5('http://127.0.0.1:1/unused'));
      await alice.machineInstances.create('hang5', { slug: 'h', context: { owner: 'alice' } });
      const started = Date.now();
      t.equal((await alice.machineInstances.sendEvent('hang5', 'h', { event: 'HANG' })).state, 'hanging', 'answered at the settle timeout');
      t.ok(Date.now() - started >= 1400, 'after waiting for the child');
      const next = await alice.machineInstances.sendEvent('hang5', 'h', { event: 'ADD' });
      t.equal(next.state, 'open', 'the error event took the machine back to open, then ADD applied');
      t.same(await types(operator, 'hang5', 'h'), ['xstate.init', 'HANG', 'xstate.error.actor.hanger', 'ADD']);
      t.match((await operator.machineInstances.admin.get('hang5', 'h')).context, {
        items: 1,
        stopped: 'child hanger was stopped: the machine did not settle in time',
      });
    },
  );

  t.test('delayed events are durable timers: they fire by themselves and cancel(id) cancels them', async (t) => {
    // 1800 ms: beyond the node's 1500 ms settle budget, so the requests do not wait for them
    const { operator } = await machineWithVersion(node, 'timers5', importing5(timers5(60_000, 1800)));
    await operator.machineInstances.create('timers5', { slug: 'c' });
    await operator.machineInstances.sendEvent('timers5', 'c', { event: 'ARM' });
    await operator.machineInstances.sendEvent('timers5', 'c', { event: 'DISARM' });
    await operator.machineInstances.create('timers5', { slug: 'f' });
    await operator.machineInstances.sendEvent('timers5', 'f', { event: 'ARM' });
    await sleep(2300);
    t.same(await types(operator, 'timers5', 'c'), ['xstate.init', 'ARM', 'DISARM'], 'a cancelled delayed raise never fires');
    t.same(await types(operator, 'timers5', 'f'), ['xstate.init', 'ARM', 'TICK'], 'an uncancelled one fired with no request');
    t.equal((await operator.machineInstances.admin.get('timers5', 'f')).context.ticks, 1);
  });

  t.test('a persistent child spawned by a v5 parent: events both ways are delivered durably', async (t) => {
    const { operator } = await machineWithVersion(node, 'parent5', parent5);
    await machineWithVersion(node, 'child5', child5).catch(async () => undefined);
    await operator.machineInstances.create('parent5', { slug: 'p' });
    await operator.machineInstances.sendEvent('parent5', 'p', { event: { type: 'START', childName: 'kid' } });
    let parent = await operator.machineInstances.admin.get('parent5', 'p');
    for (let i = 0; i < 100 && parent.context.pongs !== 1; i++, await sleep(50))
      parent = await operator.machineInstances.admin.get('parent5', 'p');
    t.equal(parent.context.pongs, 1, 'the child got PING and its sendParent reached the parent');
    t.match(parent.context.child, { type: 'statebacked.instance', machineName: 'child5', machineInstanceName: 'kid' });
    t.same(
      (await operator.machineInstances.admin.get('child5', 'kid')).context,
      { greeting: 'hello', pings: 1 },
      'spawned with its context',
    );
    await operator.machineInstances.sendEvent('parent5', 'p', { event: 'LATER' });
    t.equal(
      (await operator.machineInstances.admin.get('child5', 'kid')).context.pings,
      1,
      'the delayed send (beyond the settle budget) waits',
    );
    for (let i = 0; i < 100 && parent.context.pongs !== 2; i++, await sleep(50))
      parent = await operator.machineInstances.admin.get('parent5', 'p');
    t.equal(parent.context.pongs, 2);
    t.same(await types(operator, 'child5', 'kid'), ['xstate.init', 'PING', 'PING']);
    t.same(
      await types(operator, 'parent5', 'p'),
      ['xstate.init', 'START', 'PONG', 'LATER', 'PING', 'PONG'],
      'the delayed send is a fired timer of the parent',
    );
  });

  t.test('a bundle with its own xstate 5 copy, uploaded through the client', async (t) => {
    const code = await bundled5(timers5(60_000, 1800));
    const { operator } = await machineWithVersion(node, 'bundled5', code);
    await operator.machineInstances.create('bundled5', { slug: 'b' });
    await operator.machineInstances.sendEvent('bundled5', 'b', { event: 'ARM' });
    await sleep(2300);
    t.same(await types(operator, 'bundled5', 'b'), ['xstate.init', 'ARM', 'TICK']);
  });

  t.test('malformed v5 machines are refused at upload with the reason', async (t) => {
    const operator = new StateBackedClient(admin, { apiHost: node.url });
    await operator.machines.create('broken5');
    const attempt = (code: string) => operator.machineVersions.create('broken5', { clientInfo: 'x', makeCurrent: true, code });
    await t.rejects(
      attempt(importing5(`export default createMachine({ id: 'bad', initial: 'a', states: { a: { on: { GO: 'nowhere' } } } });`)),
      { message: /Child state 'nowhere' does not exist/ },
    );
    await t.rejects(attempt(importing5(`export default { getInitialSnapshot() {}, transition() {} };`)), {
      message: /not an XState machine/,
    });
    await t.rejects(attempt(importing5(`export default createMachine({ id: 'x' });`, { specifier: 'xstate@5/lib/utils' })), {
      message: /xstate 5 does not export/,
    });
  });

  t.test(
    'evicted v5 actors are rebuilt from their snapshot: a pending delayed event fires, and cancel(id) still cancels one',
    async (t) => {
      const small = await startNode({ args: ['--max-live-actors', '1', '--settle-timeout-ms', '50'] });
      t.teardown(() => small.stop());
      const { operator } = await machineWithVersion(small, 'evict5', importing5(timers5(60_000, 400)));
      await operator.machineInstances.create('evict5', { slug: 'x' });
      await operator.machineInstances.sendEvent('evict5', 'x', { event: 'ARM' });
      await operator.machineInstances.create('evict5', { slug: 'y' });
      await operator.machineInstances.sendEvent('evict5', 'y', { event: 'ARM' });
      await operator.machineInstances.sendEvent('evict5', 'x', { event: 'DISARM' });
      await sleep(800);
      t.same(await types(operator, 'evict5', 'x'), ['xstate.init', 'ARM', 'DISARM'], 'cancelled after being rebuilt');
      t.same(await types(operator, 'evict5', 'y'), ['xstate.init', 'ARM', 'TICK'], 'fired though evicted in between');
      t.equal((await operator.machineInstances.admin.get('evict5', 'y')).context.ticks, 1);
    },
  );
});
