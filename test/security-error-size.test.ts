/**
 * What machine code throws is bounded where the node keeps or sends it: an event's answer, and the
 * instance's logs, where each retry of a failing delayed event repeats the reason (a 4 MB message
 * thrown by ten delayed events had grown the data dir by ≈ 230 MB and the node to 1.4 GB).
 */
import t from 'tap';
import { limits } from '../src/domain/limits.js';
import { call } from './helpers/http.js';
import { machineWithVersion } from './helpers/setup.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--timer-retry-ms', '100', '--settle-timeout-ms', '0'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const since = new Date(Date.now() - 1_000).toISOString();
const BIG = 200_000;

t.test('a huge thrown message is clipped in the answer and in the logs of every retry', async (t) => {
  const { operator } = await machineWithVersion(
    node,
    'thrower',
    `import { createMachine, send } from "xstate";
export default createMachine({ id: "t", predictableActionArguments: true, initial: "a", states: { a: { on: {
  T: { actions: () => { throw new Error("x".repeat(${BIG})); } },
  LATER: { actions: send({ type: "T" }, { delay: 20 }) },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`,
  );
  await operator.machineInstances.create('thrower', { slug: 'one' });
  const answer = await call(node.url, 'POST', '/machines/thrower/i/one/events', { token: admin, body: { event: 'T' } });
  t.equal(answer.status, 400);
  t.equal(answer.body.code, 'machine-code-error');
  t.ok(answer.text.length < limits.maxMachineErrorChars + 500, `the answer is ${answer.text.length} characters`);
  t.match(answer.body.error, /… \(\d+ characters\)$/, 'saying how long the message was');

  t.equal((await call(node.url, 'POST', '/machines/thrower/i/one/events', { token: admin, body: { event: 'LATER' } })).status, 200);
  let retries: Array<{ log: string }> = [];
  for (let i = 0; i < 200 && retries.length < 6; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const page = await call(node.url, 'GET', `/logs?from=${encodeURIComponent(since)}&machine=thrower`, { token: admin });
    retries = (page.body.logs as Array<{ log: string }>).filter((entry) => /delayed event T/.test(entry.log));
  }
  t.equal(retries.length, 6, 'five retries and the drop');
  const longest = Math.max(...retries.map((entry) => entry.log.length));
  t.ok(longest < limits.maxMachineErrorChars + 1_000, `each line is clipped (the longest ${longest} characters)`);
});
