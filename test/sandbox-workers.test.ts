/**
 * The node's sandbox workers as processes: the main worker boots with the node and is replaced at once
 * when it dies; uploads are validated in a worker of their own; a worker killed from outside is no
 * machine's fault. (The quarantine rules are in sandbox-quarantine.test.ts, the stall watchdog's in
 * sandbox-neighbours.test.ts.)
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { workerPid } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';
import { crashOnBoomMachine } from './fixtures/instance-machines.js';

/** The tests of a worker dying under a request turn the stall watchdog off, which would act first. */
const noWatchdog = { args: ['--sandbox-stall-ms', '0'] };

t.test('uploads are validated in the validation worker: a bundle whose top-level code crashes it spares the main worker', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  await machineWithVersion(node, 'good', crashOnBoomMachine);
  t.equal((await call(node.url, 'POST', '/machines/good', { token, body: { slug: 'i' } })).status, 200);
  const main = workerPid(node, 'main');
  t.ok(main, 'a main worker runs');

  let refused = '';
  try {
    await machineWithVersion(node, 'crashy', `new Array(2 ** 30).fill(0);\n${crashOnBoomMachine}`);
  } catch (error) {
    refused = (error as Error).message;
  }
  // It crashes V8, or on a busy host it is still thrashing when the top-level code's time is up.
  t.match(refused, /crashed the sandbox|top-level code did not finish/, `the upload is refused and says why: ${refused}`);
  t.equal(workerPid(node, 'main'), main, 'the main worker lives on');
  t.equal((await call(node.url, 'POST', '/machines/good/i/i/events', { token, body: { event: 'ADD' } })).status, 200);
});

t.test('the main worker boots with the node, before any request; the validation and quarantine workers wait for their first use', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  let main: number | undefined;
  for (const until = Date.now() + 15_000; main === undefined && Date.now() < until; ) {
    main = workerPid(node, 'main');
    if (main === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.ok(main, 'a main worker runs although no request was made');
  t.equal(workerPid(node, 'quarantine'), undefined, 'no quarantine worker yet');
  t.equal(workerPid(node, 'validation'), undefined, 'no validation worker yet');
  await machineWithVersion(node, 'm', crashOnBoomMachine);
  t.ok(workerPid(node, 'validation'), 'the upload started the validation worker');
  t.equal(workerPid(node, 'quarantine'), undefined, 'and not the quarantine worker');
  t.equal((await call(node.url, 'POST', '/machines/m', { token: node.adminKey, body: { slug: 'a' } })).status, 200);
  t.equal(workerPid(node, 'main'), main, 'the first instance ran in the worker started at boot');
});

t.test('a main worker that dies is replaced at once, without waiting for a request', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  const waitFor = async (check: () => boolean) => {
    for (const until = Date.now() + 15_000; !check() && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 50));
    return check();
  };
  t.ok(await waitFor(() => workerPid(node, 'main') !== undefined), 'a main worker runs');
  const first = workerPid(node, 'main') as number;
  process.kill(first, 'SIGKILL');
  t.ok(await waitFor(() => (workerPid(node, 'main') ?? first) !== first), 'another one runs, and no request was made');
  t.match(node.output(), 'the sandbox worker died; a new one is starting');
});

t.test('a worker killed from outside (SIGKILL) while running a request: 503 to retry, and no version is blamed', async (t) => {
  const node = await startNode(noWatchdog);
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  const slow = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'slow', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  SLOW: { actions: assign({ n: (c) => { const end = Date.now() + 2500; while (Date.now() < end) {} return c.n + 1; } }) },
  INC: { actions: assign({ n: (c) => c.n + 1 }) },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;
  await machineWithVersion(node, 'slow', slow);
  t.equal((await call(node.url, 'POST', '/machines/slow', { token, body: { slug: 'x' } })).status, 200);
  const first = workerPid(node, 'main') as number;
  t.ok(first, 'a main worker runs');
  const sending = call(node.url, 'POST', '/machines/slow/i/x/events', { token, body: { event: 'SLOW' } });
  await new Promise((resolve) => setTimeout(resolve, 500));
  process.kill(first, 'SIGKILL');
  // The request is run once more in the next worker: kill that one too, in the middle of it.
  let second: number | undefined;
  for (const until = Date.now() + 15_000; (second === undefined || second === first) && Date.now() < until; await new Promise((r) => setTimeout(r, 25))) {
    second = workerPid(node, 'main');
  }
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  process.kill(second as number, 'SIGKILL');
  const answer = await sending;
  t.equal(answer.status, 503, 'the request is answered 503');
  t.equal(answer.body?.code, 'unavailable');
  t.match(answer.body?.error, /killed \(SIGKILL\) from outside the node .* nothing was applied: retry/);
  t.notMatch(node.output(), 'crashed its sandbox worker twice in a row', 'the version was not quarantined');
  t.equal((await call(node.url, 'POST', '/machines/slow/i/x/events', { token, body: { event: 'INC' } })).status, 200, 'and goes on');
  const history = await call(node.url, 'GET', '/machines/slow/i/x/events', { token });
  t.same(history.body.transitions.map((tr: { event: { type: string } }) => tr.event.type), ['xstate.init', 'INC'], 'the killed request left nothing');
});
