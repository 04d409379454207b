/**
 * A raw setInterval in machine code keeps a callback timer due just past the settle budget however
 * long the step waits, so the step ended at its budget "settled" with the interval still set, and
 * every later event of the instance waited out the budget again. Reaching the budget with such
 * timers set now clears them, as a step that timed out does, and says so in the instance's logs.
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { machineWithVersion } from './helpers/setup.js';
import { startNode } from './helpers/node-process.js';

const BUDGET_MS = 600;
const node = await startNode({ args: ['--settle-timeout-ms', String(BUDGET_MS)] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const since = new Date(Date.now() - 1_000).toISOString();

t.test('an interval set by an action is cleared at the settle budget; later events do not wait', async (t) => {
  const { operator } = await machineWithVersion(
    node,
    'ticking',
    `import { createMachine, assign } from "xstate";
export default createMachine({ id: "m", predictableActionArguments: true, initial: "a", context: { n: 0 }, states: {
  a: { on: { GO: { target: "b", actions: () => { setInterval(() => {}, 1); } } } },
  b: { on: { PROBE: { actions: assign({ n: (c) => c.n + 1 }) } } },
} });
export const allowRead = () => true;
export const allowWrite = () => true;`,
  );
  await operator.machineInstances.create('ticking', { slug: 'one' });
  const timed = async (event: string) => {
    const startedAt = Date.now();
    const res = await call(node.url, 'POST', '/machines/ticking/i/one/events', { token: admin, body: { event } });
    return { res, ms: Date.now() - startedAt };
  };
  const go = await timed('GO');
  t.equal(go.res.status, 200);
  t.ok(go.ms >= BUDGET_MS - 50, `GO waited out the budget (${go.ms} ms)`);
  for (let i = 1; i <= 3; i++) {
    const probe = await timed('PROBE');
    t.equal(probe.res.status, 200);
    t.equal(probe.res.body.state, 'b');
    t.ok(probe.ms < BUDGET_MS / 2, `PROBE ${i} answered at once (${probe.ms} ms)`);
  }
  let lines: string[] = [];
  for (let i = 0; i < 40 && lines.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const page = await call(node.url, 'GET', `/logs?from=${encodeURIComponent(since)}&machine=ticking`, { token: admin });
    lines = (page.body.logs as Array<{ log: string }>).map((entry) => entry.log).filter((l) => /cleared its setTimeout/.test(l));
  }
  t.equal(lines.length, 1, 'the clearing is said once, in the instance logs');
});
