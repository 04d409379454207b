import t, { type Test } from 'tap';
import { VersionIsolate } from '../src/sandbox/version-isolate.js';
import { restoredSnapshot } from '../src/sandbox/snapshot.js';
import { delaysMachine, spawningMachine } from './fixtures/pure-step-machines.js';
import { DELAYED, INVOKED_PROMISE, TOGGLE } from './fixtures/machines.js';

/**
 * Which actors rest without an interpreter between steps (pure steps, isolate/harness-pure-steps.js), and the
 * restore that rides on a step's own call. The histories they give are compared with an interpreter's
 * in pure-steps.test.ts; here, that the pure path is the one taken, and only where it may be.
 */

const allowAll = 'export const allowRead = () => true;\nexport const allowWrite = () => true;\n';
const load = async (t: Test, code: string, pureSteps = true) => {
  const vi = await VersionIsolate.load({ versionId: `v${Math.random()}`, code, pureSteps });
  t.teardown(() => vi.dispose());
  return vi;
};

/** Machines whose instances rest with delayed events to themselves pending. */
const restWithDelays: Record<string, string> = {
  delays: DELAYED,
  'a delayed send action': `import { createMachine, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { entry: send("PING", { delay: 10 }), on: { PING: "b" } }, b: {} } });
${allowAll}`,
  'a named action implemented as a delayed send': `import { createMachine, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { entry: "ping" } } }, { actions: { ping: send("PING", { delay: 5 }) } });
${allowAll}`,
  'a named delay': `import { createMachine } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { after: { TIMEOUT: "b" } }, b: {} } }, { delays: { TIMEOUT: 500 } });
${allowAll}`,
};

/** Machines that may not rest: each can leave something running or scheduled for another actor. */
const notPure: Record<string, string> = {
  invoke: INVOKED_PROMISE,
  'a send without a delay': `import { createMachine, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { on: { GO: { actions: send("PING") }, PING: "b" } }, b: {} } });
${allowAll}`,
  'a send inside choose': `import { createMachine, choose, send } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { on: { GO: { actions: choose([{ cond: () => true, actions: send("PING") }]) } } } } });
${allowAll}`,
  'a delay computed by a function': `import { createMachine } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { after: { TIMEOUT: "b" } }, b: {} } }, { delays: { TIMEOUT: () => 500 } });
${allowAll}`,
  'a delayed send to another actor': `import { createMachine, sendParent } from "xstate";
export default createMachine({ id: "s", initial: "a", states: { a: { on: { GO: { actions: sendParent("PING", { delay: 10 }) } } } } });
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

for (const [what, code] of Object.entries(restWithDelays)) {
  t.test(`a machine with ${what} rests with its delayed event pending`, async (t) => {
    const vi = await load(t, code);
    vi.start('k', { context: {} }, { nowMs: 1_000 });
    const started = vi.send('k', { type: 'START' }, 1_000);
    t.equal(started.pendingTimers.length, 1, 'the delayed event is pending');
    t.same(vi.census(), { resting: 1, interpreters: 0 });
  });
}

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
  t.same(
    spawned.runningChildren.map((c) => c.id),
    ['p'],
    'the child runs',
  );
  t.same(vi.census(), { resting: 0, interpreters: 1 });
  const due = spawned.pendingTimers[0]?.dueAt as number;
  const done = vi.advance('k', due);
  t.same(done.runningChildren, [], 'the child finished');
  t.same(done.context, { count: 0, got: 7, ref: null }, 'its result came back through the interpreter');
  t.same(vi.census(), { resting: 1, interpreters: 0 }, 'nothing runs: the instance rests again');
  t.same(vi.send('k', { type: 'INC' }).context, { count: 1, got: 7, ref: null });
});

t.test("a step may carry its actor's snapshot: restored in the same call, as a start would", async (t) => {
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
        last = vi.send(key, { type }, 1_000, {
          name: key,
          snapshot: last.snapshot,
          value: last.state,
          context: last.context,
          pendingTimers: [],
        });
        mine.push({
          state: last.state,
          context: last.context,
          tags: [...last.tags].sort(),
          done: last.done,
          snapshot: last.snapshot,
          pendingTimers: last.pendingTimers,
        });
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
  const seen = pure[0] as { state: unknown; tags: string[]; done: boolean; snapshot?: unknown }[];
  t.same(
    seen[2],
    { ...seen[2], state: { left: { busy: 'two' }, right: 'on' }, tags: ['late', 'lit', 'loud', 'working'], done: false },
    'tags of nested and parallel states',
  );
  t.same(seen[3], { ...seen[3], context: { n: 1, checked: 1 } }, "a guard sees the restored state's tags");
  t.same(seen[5], { ...seen[5], context: { n: 1, checked: 1 } });
  t.same(seen[9], { ...seen[9], state: { left: 'done', right: 'stopped' }, tags: [], done: true }, 'both regions final: done');
  t.same(seen[10], { ...seen[9], snapshot: seen[10]?.snapshot }, 'a done instance restored takes no more events');
});

t.test(
  'a restore with pending delayed events re-arms them (an interpreter, whatever the machine); a full snapshot object is taken as it is',
  async (t) => {
    const vi = await load(t, DELAYED);
    vi.start('k', { context: {} }, { nowMs: 1_000 });
    const waiting = vi.send('k', { type: 'START' }, 1_000);
    vi.stop('k');
    const restore = {
      name: 'k',
      snapshot: restoredSnapshot(waiting.snapshot, waiting.state, waiting.context),
      value: 'ignored',
      context: {},
      pendingTimers: waiting.pendingTimers,
    };
    const fired = vi.advance('k', 1_200, restore);
    t.equal(fired.state, 'timedOut');
  },
);

/**
 * One instance of the delays machine through a script of events and clock advances, each result kept
 * without its timers' ids (an isolate's own). `restoreEach`: the actor is stopped and restored from
 * its last result before every call, as an evicted instance is.
 */
const delaysScript = async (t: Test, predictable: boolean, pureSteps: boolean, restoreEach: boolean, named = false) => {
  const vi = await load(t, delaysMachine(predictable, 20, named), pureSteps);
  type Result = ReturnType<typeof vi.start>;
  let last: Result = vi.start('k', { context: {} }, { nowMs: 1_000 });
  const seen: unknown[] = [];
  const keep = (r: Result) => {
    last = r;
    seen.push({
      state: r.state,
      context: r.context,
      done: r.done,
      snapshot: r.snapshot,
      census: vi.census(),
      pendingTimers: r.pendingTimers.map(({ id: _id, ...rest }) => rest),
    });
  };
  const restore = () => {
    if (!restoreEach) return undefined;
    vi.stop('k');
    return { name: 'k', snapshot: last.snapshot, value: last.state, context: last.context, pendingTimers: last.pendingTimers };
  };
  keep(last);
  const steps: Array<[string, number]> = [
    ['PING_LATER', 1_000],
    ['@', 1_040],
    ['START', 1_100],
    ['@', 1_120],
    ['TOUCH', 1_200],
    ['NEXT', 1_210],
    ['@', 1_220],
    ['REMIND', 1_300],
    ['@', 1_320],
    ['TOUCH', 1_400],
    ['@', 1_420],
    ['@', 61_420],
    ['REMIND_LATER', 61_500],
    ['LEAVE', 61_600],
    ['@', 3_700_000],
    ['PING_LATER', 3_700_100],
    ['UNPING', 3_700_110],
    ['@', 3_700_200],
    ['START', 3_700_300],
    ['NEXT', 3_700_310],
    ['@', 3_800_000],
    ['START', 3_800_100],
    ['@', 7_500_000],
    ['START', 7_500_100],
    ['REMIND_LATER', 7_500_200],
    ['END', 7_500_300],
    ['@', 20_000_000],
    ['TOUCH', 20_000_100],
  ];
  for (const [what, at] of steps) keep(what === '@' ? vi.advance('k', at, restore()) : vi.send('k', { type: what }, at, restore()));
  return seen;
};

t.test('delayed events of a resting instance: set, cancelled, re-armed and fired as an interpreter does', async (t) => {
  for (const [predictable, named] of [
    [false, false],
    [true, false],
    [true, true],
  ] as const) {
    const interpreted = await delaysScript(t, predictable, false, false, named);
    const pure = await delaysScript(t, predictable, true, false, named);
    const pureRestored = await delaysScript(t, predictable, true, true, named);
    const interpretedRestored = await delaysScript(t, predictable, false, true, named);
    const without = (runs: unknown[]) => runs.map((r) => ({ ...(r as object), census: undefined }));
    const label = `${predictable ? 'predictableActionArguments' : 'actions after the transition'}${named ? ', named delays' : ''}`;
    t.same(without(pure), without(interpreted), `${label}: resting, as an interpreter`);
    t.same(
      without(pureRestored),
      without(interpretedRestored),
      `${label}: resting and restored before every call, as an interpreter restored so`,
    );
    // (a restored State has no 'changed' until it takes an event: the snapshots of steps that took none differ)
    const unchanged = (runs: unknown[]) => runs.map((r) => ({ ...(r as object), census: undefined, snapshot: undefined }));
    t.same(unchanged(pureRestored), unchanged(interpreted), `${label}: and, but for those snapshots, as one never restored`);
    t.ok(
      pure.every((r) => JSON.stringify((r as { census: unknown }).census) === JSON.stringify({ resting: 1, interpreters: 0 })),
      `${label}: it rested all along`,
    );
    const final = interpreted.at(-1) as { context: { n: number; fired: string[] }; done: boolean; pendingTimers: unknown[] };
    // (the reminder sent at 61,500 fires at 7,261,500: leaving the session does not cancel a send)
    t.same(
      final.context,
      { n: 2, fired: ['ping', 'tick', 'tick', 'ping-in-session', 'tick', 'tick', 'ping-in-session'] },
      `${label}: what fired, and not what was cancelled`,
    );
    t.same([final.done, final.pendingTimers], [true, []], `${label}: done, and the delays it had pending cancelled`);
    const states = interpreted.map((r) => JSON.stringify((r as { state: unknown }).state));
    t.ok(states.includes('"expired"'), `${label}: the long delay expired the session once it was left alone`);
  }
});

const SPAWN_WITH_DELAYS = `import { createMachine, assign, spawn } from "xstate";
export default createMachine({ id: "sp", predictableActionArguments: true, initial: "idle", context: { got: null, ref: null, fired: 0 },
  states: {
    idle: {
      after: { 500: { actions: assign({ fired: (c) => c.fired + 1 }) }, 100000: "late" },
      on: {
        SPAWN: { actions: assign({ ref: () => spawn(new Promise((resolve) => setTimeout(() => resolve(7), 30)), "p") }) },
        "done.invoke.p": { actions: assign({ got: (c, e) => e.data, ref: () => null }) },
        RESTART: "idle",
      },
    },
    late: {},
  } });
${allowAll}`;

t.test('a spawn while delayed events are pending: the interpreter takes them over, and the instance rests again with them', async (t) => {
  const run = async (pureSteps: boolean) => {
    const vi = await load(t, SPAWN_WITH_DELAYS, pureSteps);
    const seen: unknown[] = [];
    const keep = (r: ReturnType<typeof vi.start>) => {
      seen.push({
        state: r.state,
        context: r.context,
        children: r.runningChildren.length,
        census: vi.census(),
        pendingTimers: r.pendingTimers.map((p) => [p.kind, p.dueAt]),
      });
      return r;
    };
    keep(vi.start('k', { context: {} }, { nowMs: 1_000 }));
    const spawned = keep(vi.send('k', { type: 'SPAWN' }, 1_100));
    const due = spawned.pendingTimers.find((p) => p.kind === 'callback')?.dueAt as number;
    keep(vi.advance('k', due));
    keep(vi.advance('k', 1_500));
    keep(vi.send('k', { type: 'RESTART' }, 1_600));
    keep(vi.advance('k', 101_600));
    return seen;
  };
  const pure = (await run(true)) as Array<{ census: unknown; pendingTimers: unknown[]; context: unknown; state: unknown }>;
  const interpreted = (await run(false)) as typeof pure;
  t.same(
    pure.map((r) => ({ ...r, census: undefined })),
    interpreted.map((r) => ({ ...r, census: undefined })),
    'as an interpreter all along',
  );
  t.same(
    pure.map((r) => r.census),
    [
      { resting: 1, interpreters: 0 },
      { resting: 0, interpreters: 1 },
      { resting: 1, interpreters: 0 },
      { resting: 1, interpreters: 0 },
      { resting: 1, interpreters: 0 },
      { resting: 1, interpreters: 0 },
    ],
    'an interpreter only while the child ran',
  );
  t.same(
    pure[2]?.pendingTimers,
    [
      ['event', 1_500],
      ['event', 101_000],
    ],
    'resting again, its delayed events still pending',
  );
  t.same(
    pure[4]?.pendingTimers,
    [
      ['event', 2_100],
      ['event', 101_600],
    ],
    're-entered: the ones it had cancelled, new ones set',
  );
  t.same([pure[5]?.state, pure[5]?.context], ['late', { got: 7, ref: null, fired: 2 }]);
});
