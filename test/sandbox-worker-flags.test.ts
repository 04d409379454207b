/**
 * The sandbox worker's own V8 flags: on a host of one or two cores its garbage collector runs on its own
 * thread only (worker-lifecycle.ts says why); on larger hosts V8's default stays.
 */
import { availableParallelism } from 'node:os';
import t from 'tap';
import { defaultWorkerNodeArgs } from '../src/sandbox/index.js';

t.test('single-threaded GC on hosts of at most two cores, V8 defaults beyond', async (t) => {
  t.same(defaultWorkerNodeArgs(1), ['--single-threaded-gc']);
  t.same(defaultWorkerNodeArgs(2), ['--single-threaded-gc']);
  t.same(defaultWorkerNodeArgs(3), []);
  t.same(defaultWorkerNodeArgs(64), []);
  t.same(defaultWorkerNodeArgs(), defaultWorkerNodeArgs(availableParallelism()), 'this host by default');
});
