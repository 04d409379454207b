/**
 * SECURITY FINDING (critical): one machine can abort the whole node process.
 *
 * Isolates run inside the node's own process (sandbox-pool.ts → VersionIsolate.load, and
 * validateBundle at upload), not in supervised workers as design.md §5 requires. A V8 heap OOM inside
 * an isolate that hits the "CALL_AND_RETRY_LAST" path (e.g. one huge array allocation) is a V8 fatal
 * error: the whole process aborts (SIGABRT, exit 134) instead of isolated-vm disposing the isolate.
 * Every org on the node goes down; a delayed event doing it would crash the node again after restart.
 *
 * These tests FAIL while the finding stands.
 *
 * One node for both, with the smallest isolate heap, where the huge array aborts V8 at once instead of
 * after seconds of thrashing at the default 128 + 128 MB (smallHeapArgs).
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { smallHeapArgs } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';
import { actionMachine } from './fixtures/security/machines.js';

const HUGE = 'new Array(2 ** 30).fill(0);';

const node = await startNode({ args: smallHeapArgs });
t.teardown(() => node.stop('SIGKILL'));

t.test('an event whose action allocates one huge array fails the request, not the node', async (t) => {
  await machineWithVersion(node, 'oom', actionMachine('oom', HUGE));
  const created = await call(node.url, 'POST', '/machines/oom', { token: node.adminKey, body: { slug: 'i1' } });
  t.equal(created.status, 200);

  const sent = await call(node.url, 'POST', '/machines/oom/i/i1/events', { token: node.adminKey, body: { event: 'GO' } }).catch(
    (e: Error) => ({ status: -1, text: e.message }),
  );
  t.equal(sent.status, 400, `expected a 400 machine-code-error, got ${sent.status} ${sent.text.slice(0, 120)}`);
  t.equal(node.child.exitCode, null, `the node process must survive (exit code ${node.child.exitCode}, signal ${node.child.signalCode})`);
  const health = await call(node.url, 'GET', '/health').catch(() => ({ status: -1 }));
  t.equal(health.status, 200, 'the node still answers');
});

t.test('a bundle whose top-level code allocates one huge array is refused at upload, not the node', async (t) => {
  let outcome = 'uploaded';
  try {
    await machineWithVersion(node, 'oomtop', actionMachine('oomtop', '', HUGE));
  } catch (e) {
    outcome = (e as Error).message;
  }
  t.not(outcome, 'uploaded', 'the version must be refused');
  t.equal(node.child.exitCode, null, `the node process must survive (exit code ${node.child.exitCode}, signal ${node.child.signalCode})`);
  const health = await call(node.url, 'GET', '/health').catch(() => ({ status: -1 }));
  t.equal(health.status, 200, 'the node still answers');
});
