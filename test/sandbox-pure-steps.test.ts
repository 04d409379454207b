import t from 'tap';
import { VersionIsolate } from '../src/sandbox/version-isolate.js';
import { restoredSnapshot } from '../src/sandbox/snapshot.js';
import { spawningMachine } from './fixtures/pure-step-machines.js';
import { DELAYED, INVOKED_PROMISE, TOGGLE } from './fixtures/machines.js';

/**
 * Which actors rest without an interpreter between steps (pure steps, harness-source.ts), and the
 * restore that rides on a step's own call. The histories they give are compared with an interpreter's
 * in pure-steps.test.ts; here, that the pure path is the one taken, and only where it may be.
 */

const allowAll = 'export const allowRead = () => true;\nexport const allowWrite = () => true;\n';
const load = async (t: Tap.Test, code: string, pureSteps = true) => {
  const vi = await VersionIsolate.load({ versionId: `v${Math.random()}`, code, pureSteps });
  t.teardown(() => vi.dispose());
  return vi;
};

/** Machines that may not rest: each can leave something running or scheduled. */
const notPure: Record<string, string> = {
  delays: DELAYED,
  invoke: INVOKED_PROMISE,
  'a send action': `import { createMachine, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { on: { GO: { actions: send("PING", { delay: 10 }) }, PING: "b" } }, b: {} } });
${allowAll}`,
  'a send inside choose': `import { createMachine, choose, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { on: { GO: { actions: choose([{ cond: () => true, actions: send("PING") }]) } } } } });
${allowAll}`,
  'a named action implemented as a send': `import { createMachine, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { entry: "ping" } } }, { actions: { ping: send("PING", { delay: 5 }) } });
${allowAll}`,
  'a pure() action': `import { createMachine, actions } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { on: { GO: { actions: actions.pure(() => []) } } } } });
${allowAll}`,
  activities: `import { createMachine } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { activities: ["beep"] } } }, { activities: { beep: () => () => {} } });
${allowAll}`,
};

t.test('instances of a machine that can leave nothing running rest without an interpreter', async (t) => {
  const vi = await load(t, TOGGLE);
  for (let i = 0; i < 50; i++) vi.start(`k${i}`, { context: {} });
  for (let i = 0; i < 50; i++) vi.send(`k${i}`, { type: 'TOGGLE' });
  t.same(vi.census(), { resting: 50, interpreters: 0 });
  const off = await load(t, TOGGLE, false);
  for (let i = 0; i < 50; i++) off.start(`k${i}`, { context: {} });
  t.same(off.census(), { resting: 0, interpreters: 50 }, 'with pure steps off, every one has an interpreter');
});

for (const [what, code] of Object.entries(notPure)) {
  t.test(`a machine with ${what} keeps interpreters`, async (t) => {
    const vi = await load(t, code);
    vi.start('k', { context: {} });
    t.same(vi.census(), { resting: 0, interpreters: 1 });
  });
}

t.test('a spawn inside an assign gets an interpreter while its child runs, and the instance rests again after', async (t) => {
  const vi = await load(t, spawningMachine);
  vi.start('k', { context: {} }, { nowMs: 1_000 });
  t.same(vi.census(), { resting: 1, interpreters: 0 });
  const spawned = vi.send('k', { type: 'SPAWN' }, 1_000);
  t.same(spawned.runningChildren.map((c) => c.id), ['p'], 'the child runs');
  t.same(vi.census(), { resting: 0, interpreters: 1 });
  const due = spawned.pendingTimers[0]?.dueAt as number;
  const done = vi.advance('k', due);
  t.same(done.runningChildren, [], 'the child finished');
  t.same(done.context, { count: 0, got: 7, ref: null }, 'its result came back through the interpreter');
  t.same(vi.census(), { resting: 1, interpreters: 0 }, 'nothing runs: the instance rests again');
  t.same(vi.send('k', { type: 'INC' }).context, { count: 1, got: 7, ref: null });
});

t.test('a step may carry its actor\'s snapshot: restored in the same call, as a start would', async (t) => {
  for (const pureSteps of [true, false]) {
    const vi = await load(t, TOGGLE, pureSteps);
    vi.start('k', { context: {} });
    const first = vi.send('k', { type: 'TOGGLE' });
    vi.stop('k');
    const restore = { name: 'k', snapshot: first.snapshot, value: first.state, context: first.context, pendingTimers: [] };
    t.throws(() => vi.send('k', { type: 'TOGGLE' }), /no live actor|not live/i, 'without it, the stopped actor is missing');
    const next = vi.send('k', { type: 'TOGGLE' }, Date.now(), restore);
    t.equal(next.state, 'off');
    const again = vi.send('k', { type: 'TOGGLE' });
    t.same([again.state, again.context], ['on', { count: 2 }], `pure steps ${pureSteps ? 'on' : 'off'}: it goes on from there`);
  }
});

const TAGGED_PARALLEL = `import { createMachine, assign } from "xstate";
export default createMachine({ id: "m", predictableActionArguments: true, type: "parallel", context: { n: 0 },
  on: { CHECK: { cond: (c, e, meta) => meta.state.hasTag("lit") && meta.state.hasTag("late"), actions: assign({ checked: (c) => (c.checked || 0) + 1 }) } }, states: {
  left: { initial: "idle", states: {
    idle: { tags: ["waiting"], on: { GO: "busy" } },
    busy: { tags: ["working", "loud"], initial: "one", states: { one: { on: { NEXT: "two" } }, two: { tags: "late", on: { NEXT: "#m.left.done" } } } },
    done: { type: "final" } } },
  right: { initial: "off", states: {
    off: { on: { TOGGLE: { target: "on", actions: assign({ n: (c) => c.n + 1 }) } } },
    on: { tags: ["lit"], on: { TOGGLE: "off", STOP: "#m.right.stopped" } },
    stopped: { type: "final" } } } } });
${allowAll}`;
const TAGGED_EVENTS = ['GO', 'TOGGLE', 'NEXT', 'CHECK', 'TOGGLE', 'CHECK', 'TOGGLE', 'NEXT', 'NOPE', 'STOP', 'TOGGLE'];

t.test('restores of state values seen before (resolved once per value) give what an interpreter restored each time gives', async (t) => {
  // Three instances take the same events, each restored from its last step before every event: the
  // first restore of each value resolves it, the others reuse that. Pure steps off: an interpreter.
  const stepsOf = async (pureSteps: boolean) => {
    const vi = await load(t, TAGGED_PARALLEL, pureSteps);
    const results: unknown[][] = [];
    for (const key of ['a', 'b', 'c']) {
      const mine: unknown[] = [];
      let last = vi.start(key, { context: {} });
      for (const type of TAGGED_EVENTS) {
        vi.stop(key);
        last = vi.send(key, { type }, 1_000, { name: key, snapshot: last.snapshot, value: last.state, context: last.context, pendingTimers: [] });
        mine.push({ state: last.state, context: last.context, tags: [...last.tags].sort(), done: last.done, snapshot: last.snapshot, pendingTimers: last.pendingTimers });
      }
      results.push(mine);
    }
    return results;
  };
  const pure = await stepsOf(true);
  const interpreted = await stepsOf(false);
  t.same(pure[1], pure[0], 'the second instance, restored from values resolved before, steps as the first');
  t.same(pure[2], pure[0]);
  t.same(pure[0], interpreted[0], 'as an interpreter restored at every step');
  const seen = pure[0] as { state: unknown; tags: string[]; done: boolean }[];
  t.same(seen[2], { ...seen[2], state: { left: { busy: 'two' }, right: 'on' }, tags: ['late', 'lit', 'loud', 'working'], done: false }, 'tags of nested and parallel states');
  t.same(seen[3], { ...seen[3], context: { n: 1, checked: 1 } }, 'a guard sees the restored state\'s tags');
  t.same(seen[5], { ...seen[5], context: { n: 1, checked: 1 } });
  t.same(seen[9], { ...seen[9], state: { left: 'done', right: 'stopped' }, tags: [], done: true }, 'both regions final: done');
  t.same(seen[10], { ...seen[9], snapshot: seen[10]?.snapshot }, 'a done instance restored takes no more events');
});

t.test('a restore with pending delayed events re-arms them (an interpreter, whatever the machine); a full snapshot object is taken as it is', async (t) => {
  const vi = await load(t, DELAYED);
  vi.start('k', { context: {} }, { nowMs: 1_000 });
  const waiting = vi.send('k', { type: 'START' }, 1_000);
  vi.stop('k');
  const restore = { name: 'k', snapshot: restoredSnapshot(waiting.snapshot, waiting.state, waiting.context), value: 'ignored', context: {}, pendingTimers: waiting.pendingTimers };
  const fired = vi.advance('k', 1_200, restore);
  t.equal(fired.state, 'timedOut');
});
