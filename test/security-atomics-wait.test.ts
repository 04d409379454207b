/**
 * `Atomics.wait` sleeps without using CPU: a call blocked in it held the version's sandbox worker (and
 * every other org's requests behind it) for the whole `--cpu-limit-ms`, which counts on the clock,
 * while the stall watchdog, which counts CPU time, never moved the org aside. Machine code gets no
 * `SharedArrayBuffer` (the only way to make a buffer `Atomics.wait` accepts) and no `Atomics.wait`.
 */
import t from 'tap';
import { VersionIsolate } from '../src/sandbox/index.js';
import { actionMachine } from './fixtures/security/machines.js';

t.test('machine code cannot block its worker in Atomics.wait', async (t) => {
  const code = actionMachine('sleeper', `Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);`);
  const vi = await VersionIsolate.load({ versionId: 'v', code, memoryLimitMb: 128, cpuLimitMs: 5000 });
  t.teardown(() => vi.dispose());
  vi.start('k', { context: {} });
  const started = performance.now();
  let failure = '';
  try {
    vi.send('k', { type: 'GO' });
  } catch (e) {
    failure = String((e as Error).message);
  }
  const ms = performance.now() - started;
  t.ok(ms < 750, `the call returned at once (${ms.toFixed(0)} ms), not after the wait`);
  t.match(failure, /SharedArrayBuffer/, 'the action failed: SharedArrayBuffer is not offered');
});
