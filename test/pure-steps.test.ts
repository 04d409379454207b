import t from 'tap';
import { StateBackedClient } from '@statebacked/client';
import { bundleLikeSmply } from './helpers/bundle.js';
import { call } from './helpers/http.js';
import { startNode, type NodeProcess } from './helpers/node-process.js';
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
import { DELAYED, INVOKED_PROMISE, NESTED_PARALLEL, TOGGLE } from './fixtures/machines.js';

/**
 * Pure steps (instances of a machine that can leave nothing running rest as their state alone and
 * take events by xstate's pure transition) give exactly the histories an interpreter gives. The same
 * machines get the same events on three nodes: pure steps on, off, and on with one live instance
 * (so nearly every event restores its instance from its head in the same call). Each instance's
 * answers, its history (event, state, context of every record) and its final state must be equal.
 * Machines with delays rest with their delayed events pending (those due within the settling budget
 * fire before the answer); machines with invoked promises and child machines must not be stepped
 * purely: all give the same histories. The machines run both as the service resolves xstate for them
 * and bundled with xstate inside, as smply uploads them: a bundled copy has State and StateNode
 * classes of its own, which a restore must not mix with the service's copy.
 */

interface Case {
  machine: string;
  code: string;
  events: (string | { type: string; [k: string]: unknown })[];
}

const cases: Case[] = [
  { machine: 'features', code: featuresMachine(false), events: featuresEvents },
  { machine: 'features-predictable', code: featuresMachine(true), events: featuresEvents },
  { machine: 'spawner', code: spawningMachine, events: spawningEvents },
  { machine: 'toggle', code: TOGGLE, events: ['TOGGLE', 'TOGGLE', 'TOGGLE', 'NOPE'] },
  { machine: 'nested', code: NESTED_PARALLEL, events: ['START', 'NEXT', 'OPEN', 'NEXT', 'CLOSE', 'FINISH', 'START'] },
  { machine: 'shapes', code: shapesMachine, events: ['START', 'FLIP', 'BUMP', 'BUMP', 'NEST', 'UP', 'START'] },
  { machine: 'delayed', code: DELAYED, events: ['START', 'CANCEL', 'START', 'RESET'] },
  { machine: 'delays', code: delaysMachine(false), events: delaysEvents },
  { machine: 'delays-predictable', code: delaysMachine(true), events: delaysEvents },
  { machine: 'delays-named', code: delaysMachine(true, 20, true), events: delaysEvents },
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
  },
];
// Bundled with their own xstate copy (the spawners excepted: a bundled copy's spawn cannot reach the
// service's interpreter, README), including a counter shaped as users write it: a targetless assign on
// the root, with a plain and a parallel root.
const counter = (root: string): string => `import { createMachine, assign } from "xstate";
export const allowRead = () => true; export const allowWrite = () => true;
export default createMachine({ id: "m", predictableActionArguments: true, context: { public: { n: 0 } }, ${root},
  on: { E: { actions: assign({ public: (c) => ({ n: c.public.n + 1 }) }) }, THROW: { actions: () => { throw new Error('no'); } } } });`;
const bundledCases: Case[] = [
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

const INSTANCES = ['i1', 'i2', 'i3'];

type Answer = { status: number; body: unknown; context: unknown };
type Run = { answers: Record<string, Answer[]>; histories: Record<string, unknown> };

/** What an answer says, without its time (ts differs from node to node). */
const untimed = (body: unknown): unknown => {
  if (body === null || typeof body !== 'object') return body;
  const { ts: _ts, ...rest } = body as Record<string, unknown>;
  return rest;
};

async function drive(node: NodeProcess, c: Case): Promise<Run> {
  const token = node.adminKey as string;
  const client = new StateBackedClient(token, { apiHost: node.url });
  await client.machines.create(c.machine);
  await client.machineVersions.create(c.machine, { clientInfo: 'v1', makeCurrent: true, code: c.code });
  const run: Run = { answers: {}, histories: {} };
  const admin = async (name: string) =>
    (await call(node.url, 'GET', `/machines/${c.machine}/i/${name}/admin`, { token })).body as { context: unknown };
  for (const name of INSTANCES) {
    const created = await call(node.url, 'POST', `/machines/${c.machine}`, { token, body: { slug: name, context: { id: name } } });
    run.answers[name] = [{ status: created.status, body: untimed(created.body), context: (await admin(name)).context }];
  }
  // Round robin over the instances: with one live instance, each event finds its instance evicted.
  for (const event of c.events) {
    for (const name of INSTANCES) {
      const answer = await call(node.url, 'POST', `/machines/${c.machine}/i/${name}/events`, { token, body: { event } });
      run.answers[name]?.push({ status: answer.status, body: untimed(answer.body), context: (await admin(name)).context });
    }
  }
  for (const name of INSTANCES) {
    const history = await call(node.url, 'GET', `/machines/${c.machine}/i/${name}/events`, { token });
    run.histories[name] = (history.body as { transitions: { event: unknown; state: unknown }[] }).transitions.map((tr) => ({
      event: tr.event,
      state: tr.state,
    }));
  }
  return run;
}

const pure = await startNode();
const interpreted = await startNode({ args: ['--pure-steps', 'off'] });
const restoring = await startNode({ args: ['--max-live-actors', '1'] });
t.teardown(() => Promise.all([pure.stop(), interpreted.stop(), restoring.stop()]));

for (const c of cases) {
  t.test(`${c.machine}: the same answers and histories with pure steps on, off, and restoring each event`, async (t) => {
    const [a, b, r] = [await drive(pure, c), await drive(interpreted, c), await drive(restoring, c)];
    t.same(a.answers, b.answers, 'answers and contexts: pure steps as an interpreter');
    t.same(a.histories, b.histories, 'histories: pure steps as an interpreter');
    t.same(r.answers, b.answers, 'answers and contexts: restored each event as an interpreter');
    t.same(r.histories, b.histories, 'histories: restored each event as an interpreter');
    for (const name of INSTANCES) t.ok((b.histories[name] as unknown[]).length > 1, `${name} has a history`);
  });
}

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
