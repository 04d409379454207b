/**
 * The node's sandbox workers as processes: the main worker boots with the node and is replaced at once
 * when it dies; uploads are validated in a worker of their own; a worker killed from outside is no
 * machine's fault. (The quarantine rules are in sandbox-quarantine.test.ts, the stall watchdog's in
 * sandbox-neighbours.test.ts.)
 *
 * One node with the default watchdog serves the first three tests (the boot test first: it sees the
 * node before anything else ran there), one without it the last; both with the smallest isolate heap,
 * where a memory bomb aborts V8 at once (smallHeapArgs).
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { eventually, sleep } from './helpers/eventually.js';
import { smallHeapArgs, workerPid } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';
import { crashOnBoomMachine } from './fixtures/instance-machines.js';

const node = await startNode({ args: smallHeapArgs });
t.teardown(() => node.stop('SIGKILL'));
/** The tests of a worker dying under a request turn the stall watchdog off, which would act first. */
const noWatchdog = await startNode({ args: ['--sandbox-stall-ms', '0', ...smallHeapArgs] });
t.teardown(() => noWatchdog.stop('SIGKILL'));

t.test(
  'the main worker boots with the node, before any request; the validation and quarantine workers wait for their first use',
  async (t) => {
    const main = await eventually(() => workerPid(node, 'main'), { message: 'no main worker started' }).catch(() => undefined);
    t.ok(main, 'a main worker runs although no request was made');
    t.equal(workerPid(node, 'quarantine'), undefined, 'no quarantine worker yet');
    t.equal(workerPid(node, 'validation'), undefined, 'no validation worker yet');
    await machineWithVersion(node, 'm', crashOnBoomMachine);
    t.ok(workerPid(node, 'validation'), 'the upload started the validation worker');
    t.equal(workerPid(node, 'quarantine'), undefined, 'and not the quarantine worker');
    t.equal((await call(node.url, 'POST', '/machines/m', { token: node.adminKey, body: { slug: 'a' } })).status, 200);
    t.equal(workerPid(node, 'main'), main, 'the first instance ran in the worker started at boot');
  },
);

t.test('uploads are validated in the validation worker: a bundle whose top-level code crashes it spares the main worker', async (t) => {
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

t.test('a main worker that dies is replaced at once, without waiting for a request', async (t) => {
  const waitFor = (check: () => boolean) => eventually(check).catch(() => false);
  t.ok(await waitFor(() => workerPid(node, 'main') !== undefined), 'a main worker runs');
  const first = workerPid(node, 'main') as number;
  process.kill(first, 'SIGKILL');
  t.ok(await waitFor(() => (workerPid(node, 'main') ?? first) !== first), 'another one runs, and no request was made');
  // (the standby may take over before the node has read the death: its line can come a moment later)
  await waitFor(() => node.output().includes('the sandbox worker died; a new one is starting'));
  t.match(node.output(), 'the sandbox worker died; a new one is starting');
});

t.test('a worker killed from outside (SIGKILL) while running a request: 503 to retry, and no version is blamed', async (t) => {
  const node = noWatchdog;
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
  // (fixed waits: a moment inside the request's 2.5 s spin, which nothing outside the worker shows)
  await sleep(500);
  process.kill(first, 'SIGKILL');
  // The request is run once more in the next worker: kill that one too, in the middle of it.
  const second = await eventually(
    () => {
      const pid = workerPid(node, 'main');
      return pid !== first && pid;
    },
    { intervalMs: 25, message: 'no next main worker' },
  );
  await sleep(1_200);
  process.kill(second, 'SIGKILL');
  const answer = await sending;
  t.equal(answer.status, 503, 'the request is answered 503');
  t.equal(answer.body?.code, 'unavailable');
  t.match(answer.body?.error, /killed \(SIGKILL\) from outside the node .* nothing was applied: retry/);
  t.notMatch(node.output(), 'crashed its sandbox worker twice in a row', 'the version was not quarantined');
  t.equal((await call(node.url, 'POST', '/machines/slow/i/x/events', { token, body: { event: 'INC' } })).status, 200, 'and goes on');
  const history = await call(node.url, 'GET', '/machines/slow/i/x/events', { token });
  t.same(
    history.body.transitions.map((tr: { event: { type: string } }) => tr.event.type),
    ['xstate.init', 'INC'],
    'the killed request left nothing',
  );
});

t.test('a worker killed from outside while it loads a version for a request: the request runs once more, in the next worker', async (t) => {
  // (a version whose top-level code takes 2 s, under a CPU limit that lets it: its load is the window)
  const node = await startNode({ args: ['--sandbox-stall-ms', '0', '--cpu-limit-ms', '8000'] });
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  const heavy = `import { createMachine } from 'npm:xstate';
const end = Date.now() + 2000;
while (Date.now() < end) {}
export default createMachine({ id: 'heavy', initial: 'a', predictableActionArguments: true, states: { a: {} } });
export const allowRead = () => true;
export const allowWrite = () => true;`;
  await machineWithVersion(node, 'heavy', heavy);
  const first = await eventually(() => workerPid(node, 'main'), { message: 'no main worker' });
  const cpuTicks = (pid: number): number => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  const before = cpuTicks(first);
  const sending = call(node.url, 'POST', '/machines/heavy', { token, body: { slug: 'h' } });
  // (killed once the worker has spun a while in the version's top-level code: the load is under way)
  await eventually(() => cpuTicks(first) - before >= 40, { intervalMs: 20, message: 'the worker never loaded the version' });
  process.kill(first, 'SIGKILL');
  const answer = await sending;
  t.equal(answer.status, 200, `the create is answered 200 after its run once more: ${JSON.stringify(answer.body)}`);
  t.notMatch(node.output(), 'crashed its sandbox worker twice in a row', 'the version was not quarantined');
  t.equal((await call(node.url, 'GET', '/machines/heavy/i/h', { token })).status, 200, 'the instance exists');
});
