import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { effectsMachine, shapesMachine } from './fixtures/instance-machines.js';
import { onlyEmbedded, removeDir, startNode, tempDataDir } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { eventType } from './helpers/transitions.js';

t.test('idle actors are evicted and rebuilt from their snapshot, timers included', async (t) => {
  const node = await startNode({ args: ['--max-live-actors', '2', '--settle-timeout-ms', '300'] });
  t.teardown(() => node.stop());
  const { operator } = await machineWithVersion(node, 'evict', effectsMachine);
  const names = ['a', 'b', 'c', 'd', 'e'];
  for (const name of names) await operator.machineInstances.create('evict', { slug: name });
  for (let round = 0; round < 3; round++) {
    for (const name of names)
      await operator.machineInstances.sendEvent('evict', name, { event: { type: 'NOTE', note: `${name}${round}` } });
  }
  for (const name of names) {
    const state = await operator.machineInstances.admin.get('evict', name);
    t.same(state.context.log, [`${name}0`, `${name}1`, `${name}2`], `${name}: every event applied to the right state across evictions`);
  }
  // WAIT schedules a 200 ms delay, which does not hold the answer; the next instances evict this one,
  // and the delayed event pending in its snapshot still fires once reloaded (by then, or before BACK).
  t.equal((await operator.machineInstances.sendEvent('evict', 'a', { event: 'WAIT' })).state, 'waiting');
  for (const name of ['b', 'c']) await operator.machineInstances.sendEvent('evict', name, { event: { type: 'NOTE', note: 'evicts a' } });
  await new Promise((r) => setTimeout(r, 250));
  t.equal((await operator.machineInstances.sendEvent('evict', 'a', { event: 'BACK' })).state, 'idle');
  const { transitions } = await operator.machineInstances.listTransitions('evict', 'a');
  t.same(transitions.map(eventType).slice(-3), ['WAIT', 'xstate.after(200)#effects.waiting', 'BACK']);
});

t.test('a delayed event pending at eviction fires after the actor is reloaded', async (t) => {
  const node = await startNode({ args: ['--max-live-actors', '1', '--settle-timeout-ms', '50'] });
  t.teardown(() => node.stop());
  const { operator } = await machineWithVersion(node, 'later', effectsMachine);
  await operator.machineInstances.create('later', { slug: 'x' });
  await operator.machineInstances.create('later', { slug: 'y' });
  t.equal(
    (await operator.machineInstances.sendEvent('later', 'x', { event: 'WAIT' })).state,
    'waiting',
    'the 200 ms delay is beyond this 50 ms budget',
  );
  await operator.machineInstances.sendEvent('later', 'y', { event: { type: 'NOTE', note: 'evicts x' } });
  await new Promise((r) => setTimeout(r, 250));
  const next = await operator.machineInstances.sendEvent('later', 'x', { event: 'BACK' });
  t.equal(next.state, 'idle', 'the overdue delay fired first (waiting → waited), then BACK');
  const { transitions } = await operator.machineInstances.listTransitions('later', 'x');
  t.same(transitions.map(eventType), ['xstate.init', 'WAIT', 'xstate.after(200)#effects.waiting', 'BACK']);
});

t.test('reads answer from the committed state while an event is still settling', async (t) => {
  const node = await startNode({ args: ['--settle-timeout-ms', '1500'] });
  t.teardown(() => node.stop());
  const { operator } = await machineWithVersion(node, 'slow', effectsMachine);
  await operator.machineInstances.create('slow', { slug: 's' });
  const hanging = operator.machineInstances.sendEvent('slow', 's', { event: 'HANG' });
  await new Promise((r) => setTimeout(r, 100));
  const started = Date.now();
  const read = await operator.machineInstances.get('slow', 's');
  t.ok(Date.now() - started < 500, 'the read did not wait for the event');
  t.equal(read.state, 'idle', 'and shows the last durable state, not the unsettled one');
  t.equal((await hanging).state, 'hanging');
  t.equal((await operator.machineInstances.get('slow', 's')).state, 'hanging');
});

t.test("one org's instances are invisible to another org", async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());
  const { operator } = await machineWithVersion(node, 'private', shapesMachine);
  await operator.machineInstances.create('private', { slug: 'mine' });
  const { id: otherOrg } = await operator.orgs.create({ name: 'other' });
  const other = new StateBackedClient(node.adminKey as string, { apiHost: node.url, orgId: otherOrg });
  await t.rejects(other.machineInstances.get('private', 'mine'), { status: 404, name: 'NotFoundError' });
  await t.rejects(other.machineInstances.sendEvent('private', 'mine', { event: 'START' }), { status: 404, name: 'NotFoundError' });
  await t.rejects(other.machineInstances.list('private'), { status: 404, name: 'NotFoundError' });
});

t.test('transitions and reads are counted per org and month', onlyEmbedded("it reads the node's LMDB file"), async (t) => {
  const { openLmdbNodeStore } = await import('../src/store/lmdb/lmdb-node-store.js');
  const { usageMonth } = await import('../src/store/instance-store.js');
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const node = await startNode({ dataDir });
  const { operator } = await machineWithVersion(node, 'counted', shapesMachine);
  const orgId = (await operator.orgs.list()).orgs[0]?.id as string;
  await operator.machineInstances.create('counted', { slug: 'c' });
  await operator.machineInstances.sendEvent('counted', 'c', { event: 'START' });
  await operator.machineInstances.sendEvent('counted', 'c', { event: 'BUMP' });
  for (let i = 0; i < 3; i++) await operator.machineInstances.get('counted', 'c');
  t.equal(await node.stop(), 0);
  const store = openLmdbNodeStore(dataDir);
  t.same(
    store.instances.getUsage(orgId, usageMonth(Date.now())),
    { transitions: 3, reads: 3 },
    'one per transition record, one per state read',
  );
  await store.close();
});

t.test('machine code that crashes its sandbox worker fails only its request; other instances go on', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());
  const { operator } = await machineWithVersion(node, 'steady', effectsMachine);
  await operator.machineInstances.create('steady', { slug: 's' });
  await operator.machineInstances.sendEvent('steady', 's', { event: { type: 'NOTE', note: 'before' } });
  await operator.machines.create('crasher');
  await operator.machineVersions.create('crasher', {
    clientInfo: 'v1',
    makeCurrent: true,
    code: `import { createMachine } from "xstate";
export default createMachine({ id: "crasher", predictableActionArguments: true, initial: "idle",
  states: { idle: { on: { CRASH: { actions: () => { new Array(2 ** 30).fill(0); } } } } } });
export const allowRead = () => true;
export const allowWrite = () => true;`,
  });
  await operator.machineInstances.create('crasher', { slug: 'c' });
  const crashed = await fetch(`${node.url}/machines/crasher/i/c/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${node.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ event: 'CRASH' }),
  });
  t.equal(crashed.status, 400);
  // It thrashes at its memory limit: V8 would abort the worker after ≈ 2 s; past the stall limit the
  // node moves everyone else to a new worker and stops this one itself at the CPU limit and a second.
  t.match(((await crashed.json()) as { error: string }).error, /crashed its sandbox worker|held its sandbox worker for \d+ ms/);
  t.equal(node.child.exitCode, null, 'the node is still running');
  const after = await operator.machineInstances.sendEvent('steady', 's', { event: { type: 'NOTE', note: 'after' } });
  t.equal(after.state, 'idle', "another machine's instance goes on in a new worker");
  t.same(
    (await operator.machineInstances.admin.get('steady', 's')).context.log,
    ['before', 'after'],
    'rebuilt from its snapshot, nothing lost',
  );
  t.equal((await operator.machineInstances.get('crasher', 'c')).state, 'idle', 'the crashing instance is as it was');
  t.same((await operator.machineInstances.listTransitions('crasher', 'c')).transitions.map(eventType), ['xstate.init']);
});

t.test(
  'a send to a missing instance, queued with its creation and more sends, keeps one mailbox',
  onlyEmbedded('requests sent at once reach an owner through different nodes, in no set order'),
  async (t) => {
    const node = await startNode();
    t.teardown(() => node.stop());
    const { operator } = await machineWithVersion(node, 'racing', effectsMachine);
    const results = await Promise.allSettled([
      operator.machineInstances.sendEvent('racing', 'r', { event: { type: 'NOTE', note: 'too early' } }),
      operator.machineInstances.create('racing', { slug: 'r' }),
      ...['a', 'b', 'c'].map((note) => operator.machineInstances.sendEvent('racing', 'r', { event: { type: 'NOTE', note } })),
    ]);
    t.match(results[0], { status: 'rejected', reason: { status: 404 } }, 'the send before the creation is a 404');
    t.same(
      results.slice(1).map((r) => r.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled'],
    );
    const history = (await operator.machineInstances.listTransitions('racing', 'r')).transitions.map(
      (tr) => (tr.event as { note?: string }).note ?? eventType(tr),
    );
    t.same(history, ['xstate.init', 'a', 'b', 'c'], 'one linear history, in arrival order');
    t.same((await operator.machineInstances.admin.get('racing', 'r')).context.log, ['a', 'b', 'c']);
  },
);

t.test('a child stopped at the settling timeout whose error event the machine does not handle does not block the instance', async (t) => {
  const node = await startNode({ args: ['--settle-timeout-ms', '300'] });
  t.teardown(() => node.stop());
  const code = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'hang', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: {
  a: { on: { GO: 'h', INC: { actions: assign({ n: (c) => c.n + 1 }) } } },
  h: { invoke: { id: 'never', src: () => new Promise(() => {}) }, on: { INC: { actions: assign({ n: (c) => c.n + 1 }) }, BACK: 'a' } },
} });
export const allowRead = () => true;
export const allowWrite = () => true;`;
  const { operator } = await machineWithVersion(node, 'hang', code);
  await operator.machineInstances.create('hang', { slug: 'x' });
  t.equal((await operator.machineInstances.sendEvent('hang', 'x', { event: 'GO' })).state, 'h', 'answered at the settling timeout');
  const next = await operator.machineInstances.sendEvent('hang', 'x', { event: 'INC' });
  t.match(next, { state: 'h' }, 'the next event is applied: the unhandled error event was ignored');
  t.equal((await operator.machineInstances.sendEvent('hang', 'x', { event: 'BACK' })).state, 'a');
  const { transitions } = await operator.machineInstances.listTransitions('hang', 'x');
  t.same(transitions.map(eventType), ['xstate.init', 'GO', 'error.platform.never', 'INC', 'BACK']);
  t.equal((await operator.machineInstances.admin.get('hang', 'x')).context.n, 1);
  // Logs are written in batches: look for a few seconds.
  let text = '';
  for (
    const until = Date.now() + 5_000;
    !/has no transition/.test(text) && Date.now() < until;
    await new Promise((r) => setTimeout(r, 200))
  ) {
    text = JSON.stringify((await operator.logs.retrieve(new Date(Date.now() - 60_000), { machineName: 'hang', instanceName: 'x' })).logs);
  }
  t.match(text, /error\.platform\.never .* has no transition in this state: ignored/, 'the instance logs say so');
});
