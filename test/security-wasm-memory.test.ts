/**
 * SECURITY FINDING (high): WebAssembly memory is not counted against the isolate memory limit.
 *
 * `WebAssembly.Memory` backing stores are allocated outside the V8 heap that isolated-vm's
 * `memoryLimit` bounds (128 MB by default). Machine code can grow a memory to ~4 GiB per object (and
 * keep any number of them in module scope), so one machine version can push the node's RSS past the
 * host's RAM: the kernel OOM-kills the whole node. `heapUsedBytes()` (used for eviction decisions)
 * does not see it either.
 *
 * Fails while the finding stands (the isolate stays "healthy" with ~512 MiB of wasm memory touched).
 */
import t from 'tap';
import { VersionIsolate } from '../src/sandbox/index.js';
import { actionMachine } from './fixtures/security/machines.js';

t.test('WebAssembly memory is bounded by the isolate memory limit (or WebAssembly is not offered)', async (t) => {
  const code = actionMachine(
    'wasm',
    `
    if (typeof WebAssembly === 'undefined') return;
    const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 });
    m.grow(8192); // 512 MiB, four times the isolate limit
    const u = new Uint8Array(m.buffer);
    for (let i = 0; i < u.length; i += 4096) u[i] = 1; // touch every page
    globalThis.__keep = (globalThis.__keep || []).concat([m]);
  `,
  );
  const vi = await VersionIsolate.load({ versionId: 'v', code, memoryLimitMb: 128, cpuLimitMs: 5000 });
  t.teardown(() => vi.dispose());
  vi.start('k', { context: {} });
  const before = process.memoryUsage().rss;
  let outcome = 'ok';
  try {
    vi.send('k', { type: 'GO' });
  } catch (e) {
    outcome = (e as Error).name;
  }
  const grownMb = (process.memoryUsage().rss - before) / 1024 / 1024;
  t.comment(
    `outcome ${outcome}, host RSS grew by ${grownMb.toFixed(0)} MiB, isolate heap ${(vi.heapUsedBytes() / 1048576).toFixed(1)} MiB`,
  );
  t.ok(grownMb < 256, `host memory held by one isolate must stay near its 128 MB limit (grew ${grownMb.toFixed(0)} MiB)`);
});
