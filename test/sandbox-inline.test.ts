/**
 * `--sandbox inline` (inline-worker.ts): machine code runs in the node's own process. The API behaves
 * as with the worker process; a call's CPU and memory limits still hold (a spin ends at --cpu-limit-ms,
 * a gradual memory bomb disposes only its isolate), and the node goes on serving.
 */
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { entryPoint, startNode } from './helpers/node-process.js';
import { workerPids } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';

const MACHINE = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'inl', predictableActionArguments: true, initial: 'a', context: { public: { n: 0 } },
  states: {
    a: { on: {
      INC: { actions: assign({ public: (c) => ({ n: c.public.n + 1 }) }) },
      LATER: 'waiting',
      SPIN: { actions: () => { for (;;) {} } },
      BOMB: { actions: () => { const keep = []; for (;;) keep.push(new Array(100000).fill('x' + keep.length)); } },
    } },
    waiting: { after: { 300: 'b' } },
    b: {},
  } });
export function allowRead() { return true; }
export function allowWrite() { return true; }`;

const node = await startNode({ args: ['--sandbox', 'inline', '--cpu-limit-ms', '300', '--isolate-memory-mb', '32'] });
t.teardown(() => node.stop());
const token = node.adminKey as string;
await machineWithVersion(node, 'inl', MACHINE);

const create = (slug: string) => call(node.url, 'POST', '/machines/inl', { token, body: { slug } });
const send = (slug: string, type: string) => call(node.url, 'POST', `/machines/inl/i/${slug}/events`, { token, body: { event: { type } } });

t.test('events, reads and timers work, and no main sandbox worker process runs', async (t) => {
  t.equal((await create('c1')).status, 200);
  for (let i = 0; i < 20; i++) t.equal((await send('c1', 'INC')).status, 200);
  const read = await call(node.url, 'GET', '/machines/inl/i/c1', { token });
  t.equal(read.status, 200);
  t.equal((read.body as { publicContext: { n: number } }).publicContext.n, 20);
  t.equal((await send('c1', 'LATER')).status, 200);
  await eventually(
    async () => {
      const now = await call(node.url, 'GET', '/machines/inl/i/c1', { token });
      return (now.body as { state: unknown }).state === 'b';
    },
    { message: 'the delayed event fired' },
  );
  t.same(workerPids(node, 'main'), [], "the node forked no main sandbox worker: machine code runs in the node's process");
  const stats = await call(node.url, 'GET', '/stats', { token });
  t.match(
    stats.body,
    { sandboxWorkers: { main: { inNodeProcess: true } } },
    "GET /stats says the main sandbox's isolates are in the node's process",
  );
});

t.test('a gradual memory bomb fails its call with a 400 and costs only its isolate', async (t) => {
  t.equal((await create('bomber')).status, 200);
  const bombed = await send('bomber', 'BOMB');
  t.equal(bombed.status, 400, bombed.text);
  t.equal(node.child.exitCode, null, 'the node is still running');
  // The version's isolate was disposed: the next call loads it again and restores the instance.
  t.equal((await send('c1', 'INC')).status, 200);
  t.equal((await create('after-bomb')).status, 200);
  t.equal((await send('after-bomb', 'INC')).status, 200);
});

t.test('a spinning action ends at the CPU limit with a 400, the node goes on, and the org is moved to the quarantine worker', async (t) => {
  t.equal((await create('spinner')).status, 200);
  t.equal((await create('bystander')).status, 200);
  const started = Date.now();
  const spun = await send('spinner', 'SPIN');
  t.equal(spun.status, 400, spun.text);
  t.match(spun.body, { code: 'machine-code-error' });
  t.ok(Date.now() - started < 5_000, 'ended near the limit');
  t.equal((await call(node.url, 'GET', '/health')).status, 200);
  // Its org moved aside, as the watchdog would have moved it: the next call of the org forks the
  // quarantine worker (a process) and runs there.
  await eventually(() => /held the node's main thread for \d+ ms/.test(node.output()), { message: 'the stall was logged' });
  t.equal((await send('bystander', 'INC')).status, 200);
  t.equal(workerPids(node, 'quarantine').length, 1, "the org's calls run in the quarantine worker now");
});

t.test('--sandbox takes process or inline', async (t) => {
  const run = spawnSync(process.execPath, ['--no-node-snapshot', entryPoint, 'serve', '--sandbox', 'elsewhere', '--port', '0'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  t.not(run.status, 0);
  t.match(run.stderr + run.stdout, /--sandbox must be process or inline/);
});
