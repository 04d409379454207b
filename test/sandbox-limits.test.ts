import t from 'tap';
import {
  VersionIsolate,
  SandboxTimeoutError,
  SandboxMemoryError,
  SandboxDisposedError,
  NoLiveActorError,
  type CapturedLog,
} from '../src/sandbox/index.js';
import { importing } from './fixtures/sandbox/bundles.js';

const RUNAWAY = importing(
  `
export default createMachine({
  id: 'r', predictableActionArguments: true, initial: 'a', context: { n: 0 },
  states: { a: { on: {
    INC: { actions: assign({ n: (c) => c.n + 1 }) },
    LOOP: { actions: () => { for (;;) {} } },
    LATE_LOOP: { actions: () => { Promise.resolve().then(() => { for (;;) {} }); } },
    BOMB: { actions: () => { const keep = []; for (;;) keep.push(new Array(100000).fill('x' + keep.length)); } },
    // ≈ 12 MB held for the length of the call, then garbage
    BIG: { actions: assign({ n: (c) => { const keep = []; for (let i = 0; i < 15; i++) keep.push(new Array(100000).fill(i)); return c.n + keep.length; } }) },
    // ≈ 20 MB: with ≈ 10 MB of live actors, nearly twice a 16 MB isolate (its limit is a soft one)
    HUGE: { actions: assign({ n: (c) => { const keep = []; for (let i = 0; i < 25; i++) keep.push(new Array(100000).fill(i)); return c.n + keep.length; } }) },
  } } },
});`,
  {
    authorizers: `export function allowRead(r) { if (r.context.loop) for (;;) {} return true; }\nexport function allowWrite() { return true; }`,
  },
);

t.test('an infinite loop fails the call with SandboxTimeoutError; the isolate keeps serving', async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'v', code: RUNAWAY, cpuLimitMs: 200 });
  t.teardown(() => vi.dispose());
  vi.start('looper', { context: {} });
  vi.start('other', { context: {} });
  vi.send('other', { type: 'INC' });
  const started = Date.now();
  t.throws(() => vi.send('looper', { type: 'LOOP' }), SandboxTimeoutError);
  t.ok(Date.now() - started < 2000, 'stopped near the limit');
  t.equal(vi.healthy, true);
  t.throws(() => vi.send('looper', { type: 'INC' }), NoLiveActorError, 'the interrupted actor was dropped');
  t.equal(vi.send('other', { type: 'INC' }).context.n, 2, 'other actors are unaffected');
  // a loop in a promise continuation (microtask) is inside the same limit
  t.throws(() => vi.send('other', { type: 'LATE_LOOP' }), SandboxTimeoutError);
  t.equal(vi.start('again', { context: {} }).state, 'a');
  // authorizers too
  const read = { machineInstanceName: 'i', state: 'a', context: { loop: true }, authContext: {} };
  t.throws(() => vi.allowRead(read), SandboxTimeoutError);
  t.equal(vi.allowRead({ ...read, context: {} }), true);
});

t.test('a memory bomb disposes the isolate, the host survives, a reload works', async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'v', code: RUNAWAY, memoryLimitMb: 32, cpuLimitMs: 5000 });
  vi.start('k', { context: {} });
  t.throws(() => vi.send('k', { type: 'BOMB' }), SandboxMemoryError);
  t.equal(vi.healthy, false);
  t.throws(() => vi.send('k', { type: 'INC' }), SandboxDisposedError);
  vi.dispose();
  const again = await VersionIsolate.load({ versionId: 'v', code: RUNAWAY, memoryLimitMb: 32 });
  t.teardown(() => again.dispose());
  t.equal(again.start('k', { context: {} }).state, 'a');
});

t.test('machine code has its memory limit in each call whatever the live actors hold (their own part of the isolate)', async (t) => {
  const fill = (vi: VersionIsolate, count: number) => {
    for (let i = 0; i < count; i++) vi.start(`live-${i}`, { context: {} });
  };
  // Shared: with 1,500 live actors (≈ 10 MB with interpreters: pure steps off, else they would rest at
  // ≈ 2 KB each) in a 16 MB isolate, a call needing ≈ 20 MB kills it. (isolated-vm's limit is soft: a
  // total only a little above it is sometimes let through.)
  const shared = await VersionIsolate.load({ versionId: 'v', code: RUNAWAY, memoryLimitMb: 16, cpuLimitMs: 5000, pureSteps: false });
  t.teardown(() => shared.dispose());
  fill(shared, 1500);
  shared.start('k', { context: {} });
  // isolated-vm checks its limit when V8 collects, so a call over it is now and then let through (1 run in
  // ≈ 15 on a CI host; three in a row once, in a clean-clone run on 2026-11-30): this control is tried up
  // to six times; the first memory error disposes the isolate.
  const outcomes: string[] = [];
  for (let attempt = 0; attempt < 6 && shared.healthy; attempt++) {
    try {
      shared.send('k', { type: 'HUGE' });
      outcomes.push('let through');
    } catch (err) {
      outcomes.push(err instanceof SandboxMemoryError ? 'memory error' : String(err));
    }
  }
  t.equal(outcomes.at(-1), 'memory error', `the live actors took what the call needed (${outcomes.join(', ')})`);
  // With room for the live actors beside the 16 MB, the same call succeeds.
  const split = await VersionIsolate.load({
    versionId: 'v',
    code: RUNAWAY,
    memoryLimitMb: 16,
    liveActorMemoryMb: 24,
    cpuLimitMs: 5000,
    pureSteps: false,
  });
  t.teardown(() => split.dispose());
  fill(split, 1500);
  split.start('k', { context: {} });
  t.equal(split.send('k', { type: 'HUGE' }).context.n, 25);
  t.ok(split.heapUsedBytes() > 8 * 1024 * 1024, 'the live actors are still there');
  // A memory bomb still fails, and the error names the machine code's limit.
  t.throws(() => split.send('k', { type: 'BOMB' }), { name: 'SandboxMemoryError', message: /memory limit of 16 MB/ });
  t.equal(split.healthy, false);
});

t.test('console output is captured with level, instance, version and time', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await VersionIsolate.load({
    versionId: 'ver-9',
    onLog: (e) => logs.push(e),
    code: importing(`
console.info('loading');
export default createMachine({
  id: 'c', initial: 'a',
  states: { a: { entry: () => console.debug('entered', { ok: true }), on: { GO: { actions: [
    (c, e) => console.log('got', e),
    () => console.warn('careful'),
    () => console.error(new TypeError('bad thing')),
    actions.log((c, e) => 'xstate log ' + e.type),
  ] } } } },
});`),
  });
  t.teardown(() => vi.dispose());
  t.match(logs, [{ level: 'info', args: ['loading'], versionId: 'ver-9' }]);
  t.notOk(logs[0] && 'instanceKey' in logs[0], 'top-level logs have no instance');
  logs.length = 0;
  const before = Date.now();
  vi.start('key-1', { context: {} }, { machineInstanceName: 'inst-1' });
  vi.send('key-1', { type: 'GO', n: 1 });
  t.match(logs, [
    { level: 'debug', args: ['entered', { ok: true }] },
    { level: 'log', args: ['got', { type: 'GO', n: 1 }] },
    { level: 'warn', args: ['careful'] },
    { level: 'error', args: [{ name: 'TypeError', message: 'bad thing' }] },
    { level: 'log', args: ['xstate log GO'] },
  ]);
  for (const e of logs) {
    t.match(e, { instanceKey: 'key-1', machineInstanceName: 'inst-1', versionId: 'ver-9' });
    t.ok(e.timestamp >= before && e.timestamp <= Date.now());
  }
});

t.test('timeouts handed to isolated-vm: never below the limit, gathered on a few deadlines', async (t) => {
  const { timeoutFor } = await import('../src/sandbox/isolate-call.js');
  const firstOf = new Map<number, number>();
  let bad = 0;
  for (let now = 1_000.25; now < 1_300; now += 0.37) {
    const ms = timeoutFor(1000, now);
    if (!Number.isInteger(ms) || ms < 1000 || ms > 1000 + 50 + 2) bad++;
    const deadline = now + ms;
    const boundary = Math.floor(deadline / 50);
    const first = firstOf.get(boundary);
    // The timer thread sleeps until the earliest deadline: later ones must come after it, or
    // isolated-vm starts another thread for them.
    if (first === undefined) firstOf.set(boundary, deadline);
    else if (deadline <= first) bad++;
  }
  t.equal(bad, 0, "every timeout is an integer from the limit to one boundary more, after its boundary's first deadline");
  t.ok(firstOf.size <= 8, `300 ms of calls share ${firstOf.size} deadline boundaries`);
  t.ok(timeoutFor(20, 5_000) >= 20, 'short limits get short quanta and still their full limit');
});
