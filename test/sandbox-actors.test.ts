import t from 'tap';
import { VersionIsolate, MachineCodeError, NoLiveActorError, restoredSnapshot, type CapturedLog } from '../src/sandbox/index.js';
import { importing, bundled, TRAFFIC_MACHINE, HISTORY_MACHINE } from './fixtures/sandbox/bundles.js';
import { importing5 } from './fixtures/xstate-v5/machines.js';

async function load(code: string, logs?: CapturedLog[]): Promise<VersionIsolate> {
  const vi = await VersionIsolate.load({ versionId: 'ver-1', code, ...(logs ? { onLog: (e: CapturedLog) => logs.push(e) } : {}) });
  t.teardown(() => vi.dispose());
  return vi;
}

t.test('authorizers: true, false, throwing (false + captured log)', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await load(
    importing(`export default createMachine({ id: 'a', initial: 'x', states: { x: {} } });`, {
      authorizers: `
export function allowRead({ authContext, context }) { return authContext.sub === context.owner; }
export function allowWrite(req) {
  if (req.type === 'initialization') return req.authContext.sub !== undefined && req.state === undefined;
  if (req.event.type === 'THROW') throw new Error('nope: ' + req.machineInstanceName);
  return req.event.type === 'OK' && req.state === 'x' ? true : 'yes';
}`,
    }),
    logs,
  );
  const read = { machineInstanceName: 'i1', state: 'x', context: { owner: 'u1' }, authContext: { sub: 'u1' } };
  t.equal(vi.allowRead(read), true);
  t.equal(vi.allowRead({ ...read, authContext: { sub: 'u2' } }), false);
  t.equal(vi.allowWrite({ type: 'initialization', machineInstanceName: 'i1', context: {}, authContext: { sub: 'u' } }), true);
  t.equal(vi.allowWrite({ type: 'initialization', machineInstanceName: 'i1', context: {}, authContext: {} }), false);
  const ev = { type: 'event' as const, machineInstanceName: 'i1', state: 'x', context: {}, authContext: {} };
  t.equal(vi.allowWrite({ ...ev, event: { type: 'OK' } }), true);
  t.equal(vi.allowWrite({ ...ev, event: { type: 'OTHER' } }), false, 'truthy non-true is a rejection');
  t.equal(vi.allowWrite({ ...ev, event: { type: 'THROW' } }), false);
  t.equal(logs.length, 1);
  t.match(logs[0], { level: 'error', versionId: 'ver-1', machineInstanceName: 'i1', args: [/allowWrite threw: Error: nope: i1/] });
});

t.test('a default context that is not an object counts as {}; the created one is merged over it', async (t) => {
  for (const context of [
    '"str"',
    '7',
    'null',
    '[1, 2]',
    'new Date(0)',
    '{ toJSON() { return [1, 2]; } }',
    '{ toJSON() { return null; } }',
  ]) {
    const vi = await load(importing(`export default createMachine({ id: 'c', initial: 'x', context: ${context}, states: { x: {} } });`));
    t.same(vi.defaultContext(), {}, context);
    t.same(vi.start('k', { context: { given: 1 } }).context, { given: 1 }, `${context}: created with a context`);
    const vi5 = await load(importing5(`export default createMachine({ id: 'c', initial: 'x', context: ${context}, states: { x: {} } });`));
    t.same(vi5.defaultContext(), {}, `v5: ${context}`);
    t.same(vi5.start('k', { context: { given: 1 } }).context, { given: 1 }, `v5: ${context}: created with a context`);
  }
});

t.test('start merges context; nested + parallel states, tags, assign, final', async (t) => {
  const vi = await load(importing(TRAFFIC_MACHINE));
  t.same(vi.defaultContext(), { count: 0, owner: 'nobody' });
  let r = vi.start('k1', { context: { owner: 'me', extra: true } });
  t.match(r, { state: 'off', context: { count: 0, owner: 'me', extra: true }, tags: ['idle'], done: false, changed: true, transitions: 1 });
  r = vi.send('k1', { type: 'START' });
  t.same(r.state, { on: { light: 'green', counter: 'counting' } });
  t.same(r.tags, ['go']);
  r = vi.send('k1', { type: 'INC', by: 5 });
  t.equal(r.context.count, 5);
  t.equal(r.changed, true);
  r = vi.send('k1', { type: 'UNKNOWN' });
  t.equal(r.changed, false);
  t.equal(r.transitions, 0);
  r = vi.send('k1', { type: 'FINISH' });
  t.match(r, { state: 'finished', done: true, context: { count: 5 } });
  t.throws(() => vi.send('nobody', { type: 'X' }), NoLiveActorError);
});

t.test('after delays appear in pendingTimers and fire via advance', async (t) => {
  const vi = await load(importing(TRAFFIC_MACHINE));
  vi.start('k', { context: {} }, { nowMs: 10_000 });
  vi.send('k', { type: 'START' }, 10_000);
  let r = vi.send('k', { type: 'NEXT' }, 10_500);
  t.same(r.state, { on: { light: 'yellow', counter: 'counting' } });
  t.equal(r.pendingTimers.length, 1);
  t.match(r.pendingTimers[0], { kind: 'event', dueAt: 11_500, event: { type: 'xstate.after(1000)#traffic.on.light.yellow' } });
  r = vi.advance('k', 11_499);
  t.same(r.state, { on: { light: 'yellow', counter: 'counting' } }, 'not due yet');
  t.equal(r.transitions, 0);
  r = vi.advance('k', 11_500);
  t.same(r.state, { on: { light: 'red', counter: 'counting' } });
  t.same(r.pendingTimers, []);
  t.equal(r.transitions, 1);
});

t.test('delayed send with id can be cancelled; chains of delays catch up on a late advance', async (t) => {
  const vi = await load(
    importing(`
const { cancel } = actions;
export default createMachine({
  id: 'd', predictableActionArguments: true, initial: 'a',
  states: {
    a: { entry: send({ type: 'PING' }, { delay: 500, id: 'ping' }), on: { PING: 'b', CANCEL: { actions: cancel('ping') } } },
    b: { after: { 100: 'c' } }, c: { after: { 100: 'd' } }, d: {},
  },
});`),
  );
  let r = vi.start('k', { context: {} }, { nowMs: 0 });
  t.match(r.pendingTimers, [{ kind: 'event', dueAt: 500, sendId: 'ping', event: { type: 'PING' } }]);
  r = vi.send('k', { type: 'CANCEL' }, 10);
  t.same(r.pendingTimers, [], 'cancel clears the host timer');
  r = vi.start('k2', { context: {} }, { nowMs: 0 });
  r = vi.advance('k2', 10_000);
  t.equal(r.state, 'd', 'a → b → c → d in one late advance');
  t.equal(r.transitions, 3);
});

t.test('snapshot round trip: stop + start from snapshot gives the same state, keeps history and timers', async (t) => {
  const vi = await load(importing(TRAFFIC_MACHINE));
  vi.start('k', { context: { owner: 'x' } }, { nowMs: 0 });
  vi.send('k', { type: 'START' }, 0);
  vi.send('k', { type: 'INC' }, 0);
  const before = vi.send('k', { type: 'NEXT' }, 100);
  t.equal(before.pendingTimers.length, 1);
  vi.stop('k');
  t.throws(() => vi.send('k', { type: 'INC' }), NoLiveActorError);
  const snapshot = restoredSnapshot(before.snapshot, before.state, before.context);
  let r = vi.start('k', { snapshot, pendingTimers: before.pendingTimers }, { nowMs: 200 });
  t.same([r.state, r.context, r.tags, r.done], [before.state, before.context, before.tags, before.done]);
  t.same(r.pendingTimers, before.pendingTimers, 're-armed with the same id and due time');
  t.equal(r.transitions, 0, 'rehydrating is not a transition');
  r = vi.advance('k', 1100);
  t.same(r.state, { on: { light: 'red', counter: 'counting' } });
  r = vi.send('k', { type: 'INC', by: 2 });
  t.equal(r.context.count, 3);

  const hv = await load(importing(HISTORY_MACHINE));
  hv.start('h', { context: {} });
  hv.send('h', { type: 'N' });
  const paused = hv.send('h', { type: 'PAUSE' });
  t.equal(paused.state, 'paused');
  hv.stop('h');
  hv.start('h', { snapshot: restoredSnapshot(paused.snapshot, paused.state, paused.context) });
  t.same(hv.send('h', { type: 'RESUME' }).state, { work: 'b' }, 'history value survived the snapshot');
});

t.test('rehydrating does not re-run entry actions', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await load(
    importing(
      `export default createMachine({ id: 'e', initial: 'a', states: { a: { on: { GO: 'b' } }, b: { entry: () => console.log('entered b') } } });`,
    ),
    logs,
  );
  vi.start('k', { context: {} });
  const r = vi.send('k', { type: 'GO' });
  t.equal(logs.length, 1);
  vi.stop('k');
  vi.start('k', { snapshot: restoredSnapshot(r.snapshot, r.state, r.context) });
  t.equal(logs.length, 1);
});

const PROMISE_MACHINE = `
export default createMachine({
  id: 'p', predictableActionArguments: true, initial: 'idle', context: { result: null, error: null },
  states: {
    idle: { on: { OK: 'ok', FAIL: 'failing', HANG: 'hanging', SLOW: 'slow' } },
    ok: { invoke: { id: 'fetchOk', src: (ctx, e) => Promise.resolve(e.value * 2),
      onDone: { target: 'idle', actions: assign({ result: (c, e) => e.data }) } } },
    failing: { invoke: { id: 'fetchBad', src: () => Promise.reject(new Error('bad')),
      onError: { target: 'idle', actions: assign({ error: (c, e) => e.data.message }) } } },
    hanging: { invoke: { id: 'forever', src: () => new Promise(() => {}),
      onDone: 'idle', onError: { target: 'idle', actions: assign({ error: (c, e) => e.data }) } } },
    slow: { invoke: { id: 'timer', src: () => new Promise((resolve) => setTimeout(() => resolve('late'), 50)),
      onDone: { target: 'idle', actions: assign({ result: (c, e) => e.data }) } } },
  },
});`;

t.test('invoked promises resolve and reject through the microtask queue within the call', async (t) => {
  const vi = await load(importing(PROMISE_MACHINE));
  vi.start('k', { context: {} });
  let r = vi.send('k', { type: 'OK', value: 21 });
  t.match(r, { state: 'idle', context: { result: 42 }, runningChildren: [], transitions: 2 });
  r = vi.send('k', { type: 'FAIL' });
  t.match(r, { state: 'idle', context: { error: 'bad' }, runningChildren: [] });
});

t.test('a promise waiting on setTimeout is driven by the host clock', async (t) => {
  const vi = await load(importing(PROMISE_MACHINE));
  vi.start('k', { context: {} }, { nowMs: 1000 });
  let r = vi.send('k', { type: 'SLOW' }, 1000);
  t.equal(r.state, 'slow');
  t.same(r.runningChildren, [{ id: 'timer', kind: 'promise' }]);
  t.same(
    r.pendingTimers.map((p) => [p.kind, p.dueAt]),
    [['callback', 1050]],
  );
  r = vi.advance('k', 1050);
  t.match(r, { state: 'idle', context: { result: 'late' }, runningChildren: [], pendingTimers: [] });
});

t.test('hanging promise: running child, stopChildren, error.platform delivery', async (t) => {
  const vi = await load(importing(PROMISE_MACHINE));
  vi.start('k', { context: {} });
  let r = vi.send('k', { type: 'HANG' });
  t.same(r.runningChildren, [{ id: 'forever', kind: 'promise' }]);
  t.same(vi.stopChildren('k'), [{ id: 'forever' }]);
  r = vi.send('k', { type: 'error.platform.forever', data: 'settle timeout' });
  t.match(r, { state: 'idle', context: { error: 'settle timeout' }, runningChildren: [] });
});

t.test('callback services and child machines are reported with their kind', async (t) => {
  const vi = await load(
    importing(`
const child = createMachine({ id: 'child', initial: 'w', states: { w: { on: { DONE: 'f' } }, f: { type: 'final' } } });
export default createMachine({
  id: 'c', initial: 'a',
  states: { a: { invoke: [{ id: 'cb', src: () => () => () => {} }, { id: 'kid', src: child, onDone: 'b' }] }, b: {} },
});`),
  );
  const r = vi.start('k', { context: {} });
  t.same(
    r.runningChildren.sort((a, b) => a.id.localeCompare(b.id)),
    [
      { id: 'cb', kind: 'callback' },
      { id: 'kid', kind: 'machine' },
    ],
  );
});

t.test('a throwing action fails the step, discards the actor, and the snapshot rebuilds it', async (t) => {
  const vi = await load(
    importing(`
export default createMachine({
  id: 't', predictableActionArguments: true, initial: 'a', context: { n: 0 },
  states: { a: { on: {
    INC: { actions: assign({ n: (c) => c.n + 1 }) },
    BOOM: { target: 'b', actions: [assign({ n: 100 }), () => { throw new Error('kaboom'); }] },
    BADGUARD: { target: 'b', cond: () => { throw new Error('guard broke'); } },
    CYCLE: { actions: assign({ self: (c) => { const o = {}; o.o = o; return o; } }) },
  } }, b: {} },
});`),
  );
  vi.start('k', { context: {} });
  const committed = vi.send('k', { type: 'INC' });
  t.throws(() => vi.send('k', { type: 'BOOM' }), { name: 'MachineCodeError', message: /kaboom/ });
  t.throws(() => vi.send('k', { type: 'INC' }), NoLiveActorError, 'the failed actor was discarded');
  const snapshot = restoredSnapshot(committed.snapshot, committed.state, committed.context);
  let r = vi.start('k', { snapshot });
  t.match(r, { state: 'a', context: { n: 1 } });
  t.throws(() => vi.send('k', { type: 'BADGUARD' }), /guard broke/);
  vi.start('k', { snapshot });
  t.throws(() => vi.send('k', { type: 'CYCLE' }), MachineCodeError, 'non-JSON context fails the step');
  r = vi.start('k', { snapshot });
  t.equal(vi.send('k', { type: 'INC' }).context.n, 2);
});

t.test('runtime hook: persistent spawns, ephemeral spawns, outbound persistent sends', async (t) => {
  const vi = await load(
    importing(
      `
const child = createMachine({ id: 'eph', initial: 'w', states: { w: {} } });
export default createMachine({
  id: 'parent', predictableActionArguments: true, initial: 'a', context: {},
  states: { a: { on: {
    SPAWN: { actions: assign({ peer: () => globalThis.__statebacked_rt.spawn({ machineName: 'other' }, { name: 'peer1', context: { hello: 1 } }) }) },
    SPAWN_TYPO: { actions: assign({ peer2: () => globalThis.__statebaked_rt.spawn({ machineName: 'other', machineInstanceName: 'fixed' }) }) },
    EPHEMERAL: { actions: assign({ eph: () => globalThis.__statebacked_rt.spawn(child, 'eph1') }) },
    TELL: { actions: sendTo((ctx) => ctx.peer, { type: 'HI' }) },
    TELL_LITERAL: { actions: sendTo(() => ({ type: 'statebacked.instance', machineName: 'agg', machineInstanceName: 'one' }), { type: 'COUNT' }) },
    TELL_NAMED: { actions: sendTo((ctx, e) => ({ type: 'statebacked.instance', machineName: 'agg', machineInstanceName: e.to }), { type: 'COUNT' }) },
    UP: { actions: sendParent({ type: 'TO_PARENT' }) },
  } } },
});`,
      { imports: "import { createMachine, assign, sendTo, sendParent } from 'npm:xstate';" },
    ),
  );
  t.equal(globalThis.hasOwnProperty('__statebacked_rt'), false, 'nothing leaks to the host');
  vi.start('k', { context: {} });
  let r = vi.send('k', { type: 'SPAWN' });
  t.match(r.persistentSpawns, [{ kind: 'spawn', id: 'peer1', machineName: 'other', context: { hello: 1 } }]);
  t.match(r.context.peer, { type: 'statebacked.instance', id: 'peer1', machineName: 'other' });
  t.match((r.context.peer as { machineInstanceName: string }).machineInstanceName, /^[0-9a-f-]{36}$/);
  r = vi.send('k', { type: 'SPAWN_TYPO' });
  t.match(r.context.peer2, { machineInstanceName: 'fixed' });
  t.equal(r.persistentSpawns.length, 1);
  r = vi.send('k', { type: 'EPHEMERAL' });
  t.same(r.runningChildren, [{ id: 'eph1', kind: 'machine' }]);
  t.same(r.persistentSpawns, []);
  r = vi.send('k', { type: 'TELL' });
  t.match(r.outboundSends, [{ to: { type: 'statebacked.instance', machineName: 'other', id: 'peer1' }, event: { type: 'HI' } }]);
  r = vi.send('k', { type: 'TELL_LITERAL' });
  t.match(r.outboundSends, [{ to: { machineName: 'agg', machineInstanceName: 'one' }, event: { type: 'COUNT' } }]);
  r = vi.send('k', { type: 'UP' });
  t.same(r.outboundSends, [{ to: 'parent', event: { type: 'TO_PARENT' } }]);
  r = vi.send('k', { type: 'TELL_NAMED', to: 'two' });
  t.match(
    r.outboundSends,
    [{ to: { machineName: 'agg', machineInstanceName: 'two' }, event: { type: 'COUNT' } }],
    'a reference computed from the event',
  );
  t.throws(
    () => vi.send('k', { type: 'TELL_NAMED' }),
    {
      name: 'MachineCodeError',
      message:
        /sendTo: a statebacked.instance reference needs machineName and machineInstanceName as strings; this one has string and undefined/,
    },
    "one whose name is missing says so (not xstate's \"Unable to send event to child '[object Object]'\")",
  );
});

t.test('a bundle carrying its own xstate runs with the host clock and the runtime hook', async (t) => {
  const vi = await load(
    bundled(`
    const machine = createMachine({
      id: 'b', predictableActionArguments: true, initial: 'a', context: { n: 0 },
      states: {
        a: { after: { 200: 'b' }, on: { INC: { actions: assign({ n: (c) => c.n + 1 }) } } },
        b: { invoke: { id: 'p', src: () => Promise.resolve(7), onDone: { target: 'c', actions: assign({ n: (c, e) => c.n + e.data }) } } },
        c: { entry: assign({ peer: () => globalThis.__statebacked_rt.spawn({ machineName: 'm2' }) }) },
      },
    });
    return { machine, allowRead: () => true, allowWrite: () => true };`),
  );
  let r = vi.start('k', { context: {} }, { nowMs: 0 });
  t.match(r.pendingTimers, [{ kind: 'event', dueAt: 200 }]);
  r = vi.send('k', { type: 'INC' }, 10);
  r = vi.advance('k', 200);
  t.match(r, { state: 'c', context: { n: 8, peer: { machineName: 'm2' } } });
  t.equal(r.persistentSpawns.length, 1);
});

t.test('spawning in the initial assign sees the new interpreter', async (t) => {
  const vi = await load(
    importing(`
const child = createMachine({ id: 'kid', initial: 'w', states: { w: {} } });
export default createMachine({
  id: 'init', predictableActionArguments: true, initial: 'a', context: { base: 1 },
  entry: assign({ kid: () => globalThis.__statebacked_rt.spawn(child, 'kid1'), persistent: () => globalThis.__statebacked_rt.spawn({ machineName: 'p' }, 'p1') }),
  states: { a: {} },
});`),
  );
  const r = vi.start('k', { context: { extra: 2 } });
  t.match(r.context, { base: 1, extra: 2, kid: { id: 'kid1' }, persistent: { type: 'statebacked.instance', id: 'p1' } });
  t.same(r.runningChildren, [{ id: 'kid1', kind: 'machine' }]);
  t.match(r.persistentSpawns, [{ kind: 'spawn', id: 'p1', machineName: 'p' }]);
});

t.test("each actor has its own timers: stopping, restoring or firing one leaves the others' as they were", async (t) => {
  // (the isolate keeps each actor's timers apart, so a step finds its own without walking every actor's)
  const { DELAYED } = await import('./fixtures/machines.js');
  const vi = await load(DELAYED);
  const keys = ['a', 'b', 'c'];
  const waiting = keys.map((key, i) => {
    vi.start(key, { context: {} }, { nowMs: 1_000 });
    return vi.send(key, { type: 'START' }, 1_000 + i);
  });
  t.same(
    waiting.map((w) => w.pendingTimers.map((timer) => timer.dueAt)),
    [[1_200], [1_201], [1_202]],
  );
  vi.stop('b');
  const a = vi.advance('a', 1_100);
  t.same(a.pendingTimers, waiting[0]?.pendingTimers, "another actor stopped: this one's timer is still pending");
  const b = waiting[1] as (typeof waiting)[number];
  const restored = vi.advance('b', 1_100, {
    name: 'b',
    snapshot: b.snapshot,
    value: b.state,
    context: b.context,
    pendingTimers: b.pendingTimers,
  });
  t.same(restored.pendingTimers, b.pendingTimers, 'restored with its own timer, once');
  const fired = vi.advance('c', 1_202);
  t.equal(fired.state, 'timedOut');
  t.same(fired.pendingTimers, []);
  t.same(vi.advance('a', 1_199).pendingTimers, waiting[0]?.pendingTimers, "another actor's timer fired: this one's is still pending");
  t.equal(vi.advance('a', 1_200).state, 'timedOut', 'and fires at its time');
  t.equal(vi.advance('b', 1_200).state, 'waiting');
  t.same(vi.send('b', { type: 'CANCEL' }, 1_200).pendingTimers, [], 'cancelled: its timer is gone');
  t.equal(vi.advance('b', 5_000).state, 'idle');
});

t.test("a fired timer leaves its actor's list while another of the same actor is still pending", async (t) => {
  const vi = await load(
    importing(`export default createMachine({ id: 't', predictableActionArguments: true, initial: 'idle', context: { ticks: 0 }, states: {
  idle: { on: { START: 'waiting' } },
  waiting: { after: { 200: { actions: assign({ ticks: (c) => c.ticks + 1 }) }, 500: 'timedOut' } },
  timedOut: {} } });`),
  );
  vi.start('a', { context: {} }, { nowMs: 1_000 });
  vi.start('b', { context: {} }, { nowMs: 1_000 });
  t.same(
    vi.send('a', { type: 'START' }, 1_000).pendingTimers.map((timer) => timer.dueAt),
    [1_200, 1_500],
  );
  vi.send('b', { type: 'START' }, 1_000);
  const ticked = vi.advance('a', 1_300);
  t.same(
    [ticked.context, ticked.pendingTimers.map((timer) => timer.dueAt)],
    [{ ticks: 1 }, [1_500]],
    'the fired one is gone, the other pending',
  );
  t.same(
    vi.advance('b', 1_100).pendingTimers.map((timer) => timer.dueAt),
    [1_200, 1_500],
    "the other actor's are its own",
  );
  t.equal(vi.advance('a', 1_500).state, 'timedOut');
});
