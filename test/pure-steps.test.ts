import t from 'tap';
import { bundleLikeSmply } from './helpers/bundle.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { INSTANCES, type RoundRobinCase, runRoundRobin } from './helpers/round-robin-instances.js';
import {
  childMachinesEvents,
  childMachinesMachine,
  delaysEvents,
  delaysMachine,
  featuresEvents,
  featuresMachine,
  spawningEvents,
  spawningMachine,
} from './fixtures/pure-step-machines.js';
import { effectsMachine, shapesMachine } from './fixtures/instance-machines.js';
import { DELAYED, INVOKED_PROMISE, NESTED_PARALLEL, TOGGLE, regionOrder } from './fixtures/machines.js';

/**
 * Pure steps (instances of a machine that can leave nothing running rest as their state alone and
 * take events by xstate's pure transition) give exactly the histories an interpreter gives. The same
 * machines get the same events on three nodes: pure steps on, off, and on with one live instance
 * (so nearly every event restores its instance from its head in the same call). Each instance's
 * answers, its history (event, state, context of every record) and its final state must be equal.
 * Machines with delays rest with their delayed events pending (the durable timers deliver them; the
 * run waits for those due soon after each event); machines with invoked promises and child machines must not be stepped
 * purely: all give the same histories. The machines run both as the service resolves xstate for them
 * and bundled with xstate inside, as smply uploads them: a bundled copy has State and StateNode
 * classes of its own, which a restore must not mix with the service's copy.
 */

const cases: RoundRobinCase[] = [
  { machine: 'features', code: featuresMachine(false), events: featuresEvents },
  { machine: 'features-predictable', code: featuresMachine(true), events: featuresEvents },
  { machine: 'spawner', code: spawningMachine, events: spawningEvents },
  { machine: 'toggle', code: TOGGLE, events: ['TOGGLE', 'TOGGLE', 'TOGGLE', 'NOPE'] },
  { machine: 'nested', code: NESTED_PARALLEL, events: ['START', 'NEXT', 'OPEN', 'NEXT', 'CLOSE', 'FINISH', 'START'] },
  { machine: 'shapes', code: shapesMachine, events: ['START', 'FLIP', 'BUMP', 'BUMP', 'NEST', 'UP', 'START'] },
  { machine: 'delayed', code: DELAYED, events: ['START', 'CANCEL', 'START', 'RESET'], timers: true },
  { machine: 'regions', code: regionOrder(false), events: ['CROSS', 'E', 'E', 'CROSS', 'E', 'ROOT', 'E'] },
  { machine: 'regions-sending', code: regionOrder(true), events: ['CROSS', 'E', 'SEND', 'CROSS', 'E'] },
  { machine: 'delays', code: delaysMachine(false), events: delaysEvents, timers: true },
  { machine: 'delays-predictable', code: delaysMachine(true), events: delaysEvents, timers: true },
  { machine: 'delays-named', code: delaysMachine(true, 20, true), events: delaysEvents, timers: true },
  {
    machine: 'invoker',
    code: INVOKED_PROMISE,
    events: [{ type: 'RUN', outcome: 'resolve', delayMs: 20 }, 'RESET', { type: 'RUN', outcome: 'reject' }, 'RESET'],
  },
  { machine: 'children', code: childMachinesMachine, events: childMachinesEvents },
  {
    machine: 'effects',
    code: effectsMachine,
    events: [{ type: 'NOTE', note: 'a' }, 'WAIT', 'BACK', 'FETCH_OK', 'BACK', 'BOOM', 'FETCH_FAIL', 'BACK'],
    timers: true,
  },
];
// Bundled with their own xstate copy (the spawners excepted: a bundled copy's spawn cannot reach the
// service's interpreter, README), including a counter shaped as users write it: a targetless assign on
// the root, with a plain and a parallel root.
const counter = (root: string): string => `import { createMachine, assign } from "xstate";
export const allowRead = () => true; export const allowWrite = () => true;
export default createMachine({ id: "m", predictableActionArguments: true, context: { public: { n: 0 } }, ${root},
  on: { E: { actions: assign({ public: (c) => ({ n: c.public.n + 1 }) }) }, THROW: { actions: () => { throw new Error('no'); } } } });`;
const bundledCases: RoundRobinCase[] = [
  { machine: 'counter', code: counter('initial: "a", states: { a: {} }'), events: ['E', 'E', 'THROW', 'E'] },
  {
    machine: 'counter-parallel',
    code: counter(
      'type: "parallel", states: { r0: { initial: "a", states: { a: { on: { B: "b" } }, b: {} } }, r1: { initial: "a", states: { a: {} } } }',
    ),
    events: ['E', 'B', 'THROW', 'E', 'E'],
  },
  ...cases.filter((c) => !['spawner', 'children'].includes(c.machine)),
];
for (const c of bundledCases) cases.push({ ...c, machine: `${c.machine}-bundled`, code: await bundleLikeSmply(c.code) });

const [pure, interpreted, restoring] = await Promise.all([
  startNode(),
  startNode({ args: ['--pure-steps', 'off'] }),
  startNode({ args: ['--max-live-actors', '1'] }),
]);
t.teardown(() => Promise.all([pure.stop(), interpreted.stop(), restoring.stop()]));

for (const c of cases) {
  t.test(`${c.machine}: the same answers and histories with pure steps on, off, and restoring each event`, async (t) => {
    // (the three nodes side by side: each case's delayed events keep them waiting more than working)
    const [a, b, r] = await Promise.all([runRoundRobin(pure, c), runRoundRobin(interpreted, c), runRoundRobin(restoring, c)]);
    t.same(a.answers, b.answers, 'answers and contexts: pure steps as an interpreter');
    t.same(a.histories, b.histories, 'histories: pure steps as an interpreter');
    t.same(r.answers, b.answers, 'answers and contexts: restored each event as an interpreter');
    t.same(r.histories, b.histories, 'histories: restored each event as an interpreter');
    for (const name of INSTANCES) t.ok((b.histories[name] as unknown[]).length > 1, `${name} has a history`);
  });
}

t.test('regions take a shared event in the order they were last entered, as xstate 4 live, when restored each event too', async (t) => {
  const logOf = async (machine: string) => {
    const view = await call(restoring.url, 'GET', `/machines/${machine}/i/i1/admin`, { token: restoring.adminKey as string });
    return (view.body as { context: { public: { log: string } } }).context.public.log;
  };
  // (what xstate 4 answers live: b first after CROSS enters it; a first again after a targetless root transition)
  for (const suffix of ['', '-bundled']) {
    t.equal(await logOf(`regions${suffix}`), 'BabaBa.ab', `regions${suffix}`);
    t.equal(await logOf(`regions-sending${suffix}`), 'BaabBa', `regions-sending${suffix} (an interpreter's restore)`);
  }
});

t.test('the features machine really ran its actions, with the context, event and state the interpreter gives them', async (t) => {
  const seenBy = async (machine: string) => {
    const view = await call(pure.url, 'GET', `/machines/${machine}/i/i1/admin`, { token: pure.adminKey as string });
    return (view.body as { context: { seen: unknown[][] } }).context.seen.map((entry) => entry.slice(0, 4));
  };
  // Without predictableActionArguments, actions run after the transition, with its final context.
  const loose = await seenBy('features');
  t.same(loose.slice(0, 4), [
    ['enter-off', 'xstate.init', 0, 'off'],
    ['exit-off', 'ON', 1, { on: 'low' }],
    ['on', 'ON', 1, { on: 'low' }],
    ['enter-on', 'ON', 1, { on: 'low' }],
  ]);
  t.ok(
    loose.some((e) => JSON.stringify(e) === JSON.stringify(['bumped', 'BUMP', 5, { on: { high: 'h2' } }])),
    "BUMP's action saw both of its bumps",
  );
  // With it, each runs during the transition, with the context at its place, and meta has no state.
  const strict = await seenBy('features-predictable');
  t.same(strict.slice(0, 2), [
    ['enter-off', 'xstate.init', 0, null],
    ['exit-off', 'ON', 0, null],
  ]);
  t.ok(
    strict.some((e) => JSON.stringify(e) === JSON.stringify(['bumped', 'BUMP', 4, null])),
    "BUMP's action saw its first bump only",
  );
  t.ok(
    strict.some((e) => e[0] === 'finished') && strict.some((e) => e[0] === 'check'),
    'the actions of done.state and always transitions ran before the final entry assign',
  );
});
