/**
 * Idle actors and versions are let go (--idle-seconds): a node does not keep an isolate for every version
 * any instance ever used. What was let go comes back on the next request, and durable timers still fire.
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

const COUNTER = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'c', initial: 'on', predictableActionArguments: true, context: { n: 0 }, states: {
  on: { on: { ADD: { actions: assign({ n: (c) => c.n + 1 }) } } },
} });
export const allowRead = () => true;
export const allowWrite = () => true;
`;

const DELAYED = `import { createMachine } from 'npm:xstate';
export default createMachine({ id: 'd', initial: 'waiting', predictableActionArguments: true, states: {
  waiting: { after: { 2500: 'done' } },
  done: {},
} });
export const allowRead = () => true;
export const allowWrite = () => true;
`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

t.test('idle actors and versions are unloaded; busy ones stay; both come back on demand', async (t) => {
  const node = await startNode({ args: ['--idle-seconds', '2'] });
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  const busyVersion = (await machineWithVersion(node, 'busy', COUNTER)).machineVersionId;
  const quietVersion = (await machineWithVersion(node, 'quiet', COUNTER)).machineVersionId;
  const laterVersion = (await machineWithVersion(node, 'later', DELAYED)).machineVersionId;
  // "busy" last: with 2 s of idle time, the setup itself must not leave it idle.
  t.equal((await call(node.url, 'POST', '/machines/later', { token, body: { slug: 'a' } })).status, 200);
  for (const machine of ['quiet', 'busy']) {
    t.equal((await call(node.url, 'POST', `/machines/${machine}`, { token, body: { slug: 'a' } })).status, 200);
    t.equal((await call(node.url, 'POST', `/machines/${machine}/i/a/events`, { token, body: { event: 'ADD' } })).status, 200);
  }

  // "busy" gets an event every 250 ms for 4.5 s; "quiet" and "later" get nothing.
  let busyEvents = 1;
  const until = Date.now() + 4_500;
  while (Date.now() < until) {
    await sleep(250);
    t.equal((await call(node.url, 'POST', '/machines/busy/i/a/events', { token, body: { event: 'ADD' } })).status, 200);
    busyEvents++;
  }
  const lines = node
    .output()
    .split('\n')
    .filter((line) => line.includes('idle for 2 s'));
  t.ok(lines.length > 0, 'the node says what it let go');
  const said = lines.join(' | ');
  t.match(said, quietVersion, 'the idle version went');
  t.match(said, laterVersion, 'and the one whose instance waits for a delayed event');
  t.notMatch(said, busyVersion, `not the busy one: ${said}`);
  t.match(said, /evicted [1-9]\d* live actors/, 'idle actors went too');

  // Everything comes back: the idle counter goes on from its committed state, the delayed event fired.
  const quiet = await call(node.url, 'POST', '/machines/quiet/i/a/events', { token, body: { event: 'ADD' } });
  t.equal(quiet.status, 200);
  t.same((quiet.body as { publicContext: unknown; state: unknown }).state, 'on');
  const quietHistory = await call(node.url, 'GET', '/machines/quiet/i/a/events', { token });
  t.equal((quietHistory.body as { transitions: unknown[] }).transitions.length, 3, 'init, ADD before, ADD after');
  const busyHistory = await call(node.url, 'GET', '/machines/busy/i/a/events', { token });
  t.equal((busyHistory.body as { transitions: unknown[] }).transitions.length, busyEvents + 1);
  await sleep(500);
  const later = await call(node.url, 'GET', '/machines/later/i/a', { token });
  t.equal((later.body as { state: unknown }).state, 'done', 'the delayed event of an evicted actor fired from its durable timer');
});
