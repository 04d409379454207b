/**
 * The sandbox worker channel carries batches: many requests in one message each way. When machine
 * code crashes the worker, every request of its batches in flight must fail cleanly (400, nothing
 * applied) or succeed durably, never anything in between, and the next requests go to a new worker.
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

const CODE = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'b', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  ADD: { actions: assign({ n: (c) => c.n + 1 }) },
  BOOM: { actions: () => { new Array(2 ** 30).fill(0); } },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;
`;

const INSTANCES = 16;

t.test('a crash among many requests in flight: each is answered 200 and kept, or 400 and left out', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  await machineWithVersion(node, 'batches', CODE);
  const send = (name: string, type: string) => call(node.url, 'POST', `/machines/batches/i/${name}/events`, { token: node.adminKey, body: { event: type } });
  for (let i = 0; i < INSTANCES; i++) t.equal((await call(node.url, 'POST', '/machines/batches', { token: node.adminKey, body: { slug: `i${i}` } })).status, 200);

  // Every instance gets an ADD while another instance crashes the worker, all at once.
  const outcomes = await Promise.all([send('i0', 'BOOM'), ...Array.from({ length: INSTANCES - 1 }, (_, i) => send(`i${i + 1}`, 'ADD'))]);
  t.equal(outcomes[0]?.status, 400, 'the crashing event fails');
  const statuses = outcomes.map((o) => o.status);
  t.ok(statuses.every((s) => s === 200 || s === 400), `only 200 or 400: ${statuses.join(' ')}`);
  for (const o of outcomes) if (o.status === 400) t.equal((o.body as { code: string }).code, 'machine-code-error');
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
  t.same((crashed.body as { transitions: { event: { type: string } }[] }).transitions.map((tr) => tr.event.type), ['xstate.init'], 'the crashing event left nothing');
});
