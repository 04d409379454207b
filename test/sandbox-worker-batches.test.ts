/**
 * The sandbox worker channel carries batches: many requests in one message each way. When machine
 * code crashes the worker, every request of its batches in flight fails there; nothing of them was
 * applied, so the node runs each once more, one at a time: the innocent ones succeed in a new worker,
 * and the culprit crashes it again and fails alone (400, nothing applied).
 *
 * The stall watchdog is off here (--sandbox-stall-ms 0): with it, the bomb holds the worker long enough
 * to be moved aside before the crash (sandbox-neighbours.test.ts); this rule serves crashes that come
 * at once.
 *
 * Every crash costs as long as V8 thrashes at the isolate's heap limit: the nodes here have the
 * smallest heap (smallHeapArgs). One node serves the tests without the watchdog, another the one with it.
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { smallHeapArgs } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';
import { eventType } from './helpers/transitions.js';
import { crashOnBoomMachine } from './fixtures/instance-machines.js';

const INSTANCES = 16;

const noWatchdog = await startNode({ args: ['--sandbox-stall-ms', '0', ...smallHeapArgs] });
t.teardown(() => noWatchdog.stop('SIGKILL'));
/** The stall watchdog on, as by default. */
const watched = await startNode({ args: smallHeapArgs });
t.teardown(() => watched.stop('SIGKILL'));

t.test('a crash among many requests in flight: the others are run again and succeed; the culprit fails alone', async (t) => {
  const node = noWatchdog;
  await machineWithVersion(node, 'batches', crashOnBoomMachine);
  const send = (name: string, type: string) =>
    call(node.url, 'POST', `/machines/batches/i/${name}/events`, { token: node.adminKey, body: { event: type } });
  for (let i = 0; i < INSTANCES; i++)
    t.equal((await call(node.url, 'POST', '/machines/batches', { token: node.adminKey, body: { slug: `i${i}` } })).status, 200);

  // Every instance gets an ADD while another instance crashes the worker, all at once.
  const outcomes = await Promise.all([send('i0', 'BOOM'), ...Array.from({ length: INSTANCES - 1 }, (_, i) => send(`i${i + 1}`, 'ADD'))]);
  t.equal(outcomes[0]?.status, 400, 'the crashing event fails');
  t.equal((outcomes[0]?.body as { code: string }).code, 'machine-code-error');
  t.match((outcomes[0]?.body as { error: string }).error, /crashed its sandbox worker/, 'and says why');
  const statuses = outcomes.slice(1).map((o) => o.status);
  t.ok(
    statuses.every((s) => s === 200),
    `every other event is applied: ${statuses.join(' ')}`,
  );
  t.equal(node.child.exitCode, null, 'the node survives');

  // What was acknowledged is in the history, what failed is not; then every instance goes on.
  for (let i = 1; i < INSTANCES; i++) {
    const history = await call(node.url, 'GET', `/machines/batches/i/i${i}/events`, { token: node.adminKey });
    const types = (history.body as { transitions: { event: { type: string } }[] }).transitions.map((tr) => tr.event.type);
    t.same(types, outcomes[i]?.status === 200 ? ['xstate.init', 'ADD'] : ['xstate.init'], `i${i}: history matches its answer`);
    const next = await send(`i${i}`, 'ADD');
    t.equal(next.status, 200, `i${i} goes on in a new worker`);
    t.equal((next.body as { state: unknown }).state, 'a', 'and answers its state');
  }
  const crashed = await call(node.url, 'GET', '/machines/batches/i/i0/events', { token: node.adminKey });
  t.same(
    (crashed.body as { transitions: { event: { type: string } }[] }).transitions.map((tr) => tr.event.type),
    ['xstate.init'],
    'the crashing event left nothing',
  );
});

t.test('creates in flight when another request crashes the worker are run again and succeed', async (t) => {
  const node = watched;
  await machineWithVersion(node, 'creates', crashOnBoomMachine);
  const token = node.adminKey;
  t.equal((await call(node.url, 'POST', '/machines/creates', { token, body: { slug: 'bomb' } })).status, 200);
  const outcomes = await Promise.all([
    call(node.url, 'POST', '/machines/creates/i/bomb/events', { token, body: { event: 'BOOM' } }),
    ...Array.from({ length: 8 }, (_, i) =>
      call(node.url, 'POST', '/machines/creates', { token, body: { slug: `new${i}`, context: { n: i } } }),
    ),
  ]);
  t.equal(outcomes[0]?.status, 400, 'the crashing event fails');
  t.same(
    outcomes.slice(1).map((o) => o.status),
    Array(8).fill(200),
    'every create is applied',
  );
  for (let i = 0; i < 8; i++) {
    const read = await call(node.url, 'GET', `/machines/creates/i/new${i}`, { token });
    t.equal(read.status, 200, `new${i} exists`);
    const history = await call(node.url, 'GET', `/machines/creates/i/new${i}/events`, { token });
    t.equal((history.body as { transitions: unknown[] }).transitions.length, 1, 'with its one initial transition');
  }
});

t.test('unloading a version frees its isolate in the worker; loading it again works', async (t) => {
  // The built module: the client forks the worker script that sits beside it (dist/, as make test builds).
  const { SandboxClient, SandboxDisposedError } = await import('../dist/sandbox/index.js');
  const client = new SandboxClient({ onLog: () => undefined });
  t.teardown(() => client.close());
  const settings = {
    memoryLimitMb: 64,
    liveActorMemoryMb: 0,
    cpuLimitMs: 1000,
    egress: { allow: [], timeoutMs: 1000, maxResponseBytes: 1000 },
  };
  const version = await client.load('ver_unload', crashOnBoomMachine, settings);
  await version.start('k', { context: {} }, { machineInstanceName: 'k' });
  t.equal((await version.send('k', { type: 'ADD' }, Date.now())).context.n, 1);

  client.unload('ver_unload');
  t.equal(version.healthy, false, 'the version reads as gone at once');
  await t.rejects(version.send('k', { type: 'ADD' }, Date.now()), SandboxDisposedError, 'and refuses calls');

  // The worker dropped it too: a version loaded again under the id starts from nothing.
  const again = await client.load('ver_unload', crashOnBoomMachine, settings);
  await t.rejects(again.send('k', { type: 'ADD' }, Date.now()), /no live actor/, 'no actor survived the unload');
  await again.start('k', { context: {} }, { machineInstanceName: 'k' });
  t.equal((await again.send('k', { type: 'ADD' }, Date.now())).context.n, 1);

  // An unload that overtakes a load still in progress wins: the load fails, nothing is kept.
  const racing = client.load('ver_race', crashOnBoomMachine, settings);
  client.unload('ver_race');
  await t.rejects(racing, SandboxDisposedError, 'the overtaken load fails');
  const fresh = await client.load('ver_race', crashOnBoomMachine, settings);
  await fresh.start('k', { context: {} }, { machineInstanceName: 'k' });
  t.equal((await fresh.send('k', { type: 'ADD' }, Date.now())).context.n, 1, 'and the version loads again afterwards');
});

t.test("deleting a machine frees its versions' isolates; a machine made again under its name runs", async (t) => {
  // In an org of its own: the first org's versions run in the quarantine worker since its bomb above.
  const node = noWatchdog;
  const org = await call(node.url, 'POST', '/orgs', { token: node.adminKey, body: { name: 'deletes' } });
  t.equal(org.status, 200);
  const inOrg = () => machineWithVersion(node, 'gone', crashOnBoomMachine, org.body.id as string);
  const { operator } = await inOrg();
  await operator.machineInstances.create('gone', { slug: 'x' });
  await operator.machineInstances.sendEvent('gone', 'x', { event: 'ADD' });
  await operator.machineInstances.dangerously.delete('gone', 'x', { dangerDataWillBeDeletedForever: true });
  await operator.machines.dangerously.delete('gone', { dangerDataWillBeDeletedForever: true });
  await inOrg();
  await operator.machineInstances.create('gone', { slug: 'x' });
  const after = await operator.machineInstances.sendEvent('gone', 'x', { event: 'ADD' });
  t.equal(after.state, 'a', 'the new machine runs');
  t.same(
    (await operator.machineInstances.listTransitions('gone', 'x')).transitions.map(eventType),
    ['xstate.init', 'ADD'],
    'with its own history only',
  );
});
