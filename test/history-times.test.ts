import t from 'tap';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

/**
 * A delayed event is dated when it was applied, whether the durable timers delivered it or it fired
 * inside a step's settle window (while a child still ran), not when its step was committed: the
 * history reads as what happened when, on the same clock as the answer's `ts`.
 */
const code = `import { createMachine } from 'npm:xstate';
export default createMachine({ id: 'slow', initial: 'warming', predictableActionArguments: true, states: {
  warming: { after: { 3000: 'idle' } },
  idle: { on: { START: 'waiting' } },
  // (the child keeps the step settling past the delay, which fires inside its window)
  waiting: { invoke: { src: () => new Promise((resolve) => setTimeout(resolve, 3500)) }, after: { 3000: 'done' } },
  done: {},
} });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const node = await startNode({ args: ['--settle-timeout-ms', '10000'] });
t.teardown(() => node.stop());
const { operator } = await machineWithVersion(node, 'slow', code);

type Transition = { createdAt: string; event: { type: string }; state: unknown };
const times = (transitions: Transition[]) => transitions.map((tr) => Date.parse(tr.createdAt));
/** Loose: the settle loop wakes on a JS timer, and the machine shares 2 cores with other tests. */
const aboutThreeSeconds = (ms: number) => ms >= 2_900 && ms < 4_500;

t.test('a 3 s delay after a create (the durable timers) and inside the settle window of an event', async (t) => {
  const createdAt = Date.now();
  const created = await operator.machineInstances.create('slow', { slug: 's' });
  const answeredAt = Date.now();
  t.equal(created.state, 'warming', 'the create answers before its 3 s delay');
  let history: Transition[] = [];
  for (const until = Date.now() + 10_000; history.length < 2 && Date.now() < until; await new Promise((r) => setTimeout(r, 100)))
    history = (await operator.machineInstances.listTransitions('slow', 's')).transitions as Transition[];
  t.same(
    history.map((tr) => tr.event.type),
    ['xstate.init', 'xstate.after(3000)#slow.warming'],
  );
  const [init, warmed] = times(history) as [number, number];
  t.ok(
    init >= createdAt - 5 && init <= answeredAt,
    `the first record is dated when the create's step began (${init - createdAt} ms after the request, ${answeredAt - init} ms before the answer)`,
  );
  t.equal(created.ts, init, "the create's ts is its record's");
  t.ok(aboutThreeSeconds(warmed - init), `the delayed event is dated 3 s after it (${warmed - init} ms)`);
  t.equal((await operator.machineInstances.get('slow', 's')).ts, warmed, "a read's ts is the delayed event's");

  const sentAt = Date.now();
  const answer = await operator.machineInstances.sendEvent('slow', 's', { event: 'START' });
  t.equal(answer.state, 'done');
  history = (await operator.machineInstances.listTransitions('slow', 's')).transitions as Transition[];
  t.same(
    history.map((tr) => tr.event.type),
    ['xstate.init', 'xstate.after(3000)#slow.warming', 'START', 'xstate.after(3000)#slow.waiting'],
  );
  t.same(
    history.map((tr) => tr.state),
    ['warming', 'idle', 'waiting', 'done'],
    'each record holds the state its event left',
  );
  const all = times(history);
  t.ok(
    all.every((ms, i) => i === 0 || ms > (all[i - 1] as number)),
    `in order: ${history.map((tr) => tr.createdAt).join(' ')}`,
  );
  const [, , started, fired] = all as [number, number, number, number];
  t.ok(started >= sentAt - 5 && started < sentAt + 1_000, 'START is dated when it was applied');
  t.ok(aboutThreeSeconds(fired - started), `the delayed event is dated 3 s after START (${fired - started} ms)`);
  t.equal(answer.ts, fired, "the answer's ts is the last record's");
  t.equal((await operator.machineInstances.get('slow', 's')).ts, fired, 'and so is a read');

  // The next event is dated after all of them.
  const again = await operator.machineInstances.sendEvent('slow', 's', { event: 'START' });
  t.ok(again.ts > fired, 'ts keeps growing');
});
