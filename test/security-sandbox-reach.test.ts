/**
 * Defended attacks on the isolate boundary (regression tests; all expected to pass):
 * stack-frame introspection during host callbacks, constructor chains of everything the audited
 * callbacks hand back, prototype/JSON tampering against the fetch starter and the step result,
 * module specifiers, and timer edge cases.
 */
import t from 'tap';
import { VersionIsolate, type CapturedLog } from '../src/sandbox/index.js';
import { ALLOW_ALL } from './fixtures/security/machines.js';

const PROBE_MACHINE = `import { createMachine, assign } from 'npm:xstate';
const probes = {};
function seen(v) { return v === undefined ? 'undefined' : v === null ? 'null' : typeof v; }
function probe(name, fn) { try { probes[name] = String(fn()); } catch (e) { probes[name] = 'threw:' + (e && e.name); } }
// collect every function / receiver V8 exposes through structured stack frames
const leaked = [];
Error.prepareStackTrace = (err, frames) => {
  for (const f of frames) {
    let fn, self;
    try { fn = f.getFunction(); } catch (_) {}
    try { self = f.getThis(); } catch (_) {}
    for (const v of [fn, self]) {
      if (v === undefined || v === null || v === globalThis) continue;
      try { leaked.push(typeof v === 'function' ? v.constructor('return typeof process + typeof require')() : Object.keys(v).join(',')); } catch (e) { leaked.push('x'); }
    }
  }
  return 'stack';
};
function deep(n, fn) { return n === 0 ? fn() : deep(n - 1, fn) + 0; }
function overflowInto(fn) {
  // run fn at every stack depth close to the limit, so it overflows inside the callback crossing
  let depth = 0;
  try { (function r() { depth++; r(); })(); } catch (_) {}
  for (let d = depth; d > depth - 200 && d > 0; d -= 3) { try { deep(d, fn); } catch (e) { void e.stack; } }
}
export const run = () => {
  overflowInto(() => console.log('x'));
  overflowInto(() => crypto.getRandomValues(new Uint8Array(300)));
  overflowInto(() => crypto.randomUUID());
  overflowInto(() => { crypto.subtle.digest('SHA-256', new Uint8Array(4)).catch(() => {}); });
  probe('leaked', () => leaked.filter((x) => x !== 'x' && x !== 'undefinedundefined' && x !== '').join('|'));
  probe('randomCtor', () => crypto.getRandomValues(new Uint8Array(4)).constructor.constructor('return typeof process')());
  return probes;
};
let digest;
crypto.subtle.digest('SHA-256', new Uint8Array(4)).then((b) => { digest = b; });
export default createMachine({ id: 'p', initial: 'a', context: {}, states: { a: { on: {
  PROBE: { actions: assign(() => ({ probes: run(), digestCtor: (() => { try { return digest.constructor.constructor('return typeof process')(); } catch (e) { return 'threw'; } })() })) },
  TAMPER_JSON: { actions: () => { const real = JSON.stringify; JSON.stringify = function (v) { return v && v.pendingTimers ? '{"state":"a"}' : real.apply(this, arguments); }; } },
  TAMPER_TOJSON: { actions: () => {
    Object.defineProperty(Object.prototype, 'toJSON', { configurable: true, value: function () {
      if (this && typeof this.url === 'string' && Array.isArray(this.headers)) return { url: 'http://127.0.0.1:1/', method: 'GET', headers: [], redirect: 'follow' };
      return this;
    } });
    fetch('https://example.com/').then(() => {}, (e) => console.log('fetch', e.message));
    delete Object.prototype.toJSON;
  } },
  TIMERS: { actions: () => {
    for (const d of [-1, NaN, -Infinity, '1e3', { valueOf() { return 5; } }, 2 ** 53, undefined]) setTimeout(() => {}, d);
    setInterval(() => {}, 0);
  } },
} } } });
${ALLOW_ALL}`;

t.test('stack frames and callback results hand out no host function or object', async (t) => {
  const logs: CapturedLog[] = [];
  // (the probe walks many frames, ≈ 300 ms on a quiet host: a CPU limit far above that, as the test is about leaks)
  const vi = await VersionIsolate.load({ versionId: 'v', code: PROBE_MACHINE, onLog: (e) => logs.push(e), cpuLimitMs: 10_000 });
  t.teardown(() => vi.dispose());
  vi.start('k', { context: {} });
  const r = vi.send('k', { type: 'PROBE' });
  const probes = r.context.probes as Record<string, string>;
  t.equal(probes.leaked, '', `frames exposed nothing that reaches the host: ${probes.leaked}`);
  t.equal(probes.randomCtor, 'undefined');
  t.equal(r.context.digestCtor, 'undefined');
});

t.test('JSON.stringify tampering gives the host a malformed result, which it refuses', async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'v', code: PROBE_MACHINE });
  t.teardown(() => vi.dispose());
  vi.start('k', { context: {} });
  t.throws(() => vi.send('k', { type: 'TAMPER_JSON' }), { name: 'MachineCodeError' });
});

t.test('Object.prototype.toJSON cannot rewrite the fetch request past the host egress check', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await VersionIsolate.load({
    versionId: 'v',
    code: PROBE_MACHINE,
    onLog: (e) => logs.push(e),
    dnsLookup: async () => [{ address: '93.184.216.34', family: 4 }],
  });
  t.teardown(() => vi.dispose());
  vi.start('k', { context: {} });
  vi.send('k', { type: 'TAMPER_TOJSON' });
  await vi.nextActivity(0);
  await new Promise((r) => setTimeout(r, 50));
  vi.advance('k', Date.now());
  const line = logs.map((l) => l.args.join(' ')).find((l) => l.startsWith('fetch'));
  t.match(line, /loopback address and not in the allow-list/, 'the forged 127.0.0.1 URL was still checked on the host');
});

t.test('odd timer delays do not produce non-numeric or past due times', async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'v', code: PROBE_MACHINE });
  t.teardown(() => vi.dispose());
  const now = Date.now();
  vi.start('k', { context: {} }, { nowMs: now });
  const r = vi.send('k', { type: 'TIMERS' }, now);
  for (const timer of r.pendingTimers) t.ok(typeof timer.dueAt === 'number' && timer.dueAt >= now, `dueAt ${timer.dueAt}`);
  // an interval of 0 cannot spin the host: one advance far ahead is bounded
  const started = Date.now();
  vi.advance('k', now + 10 ** 9);
  t.ok(Date.now() - started < 2000, 'advance is bounded');
});

t.test('only xstate specifiers resolve; our own modules and the file system do not', async (t) => {
  const specifiers = [
    'statehold:harness',
    'statehold:bundle',
    'statehold:entry',
    'file:///statehold/harness.mjs',
    // the harness's parts, which resolve only for the harness's own modules
    './harness-base.js',
    './harness-v4.js',
    'file:///statehold/harness-base.mjs',
    'node:fs',
    'fs',
    'npm:xstate/../../../package.json',
    'xstate/../../etc/passwd',
    'data:text/javascript,export default 1',
    'isolated-vm',
    'npm:lodash',
  ];
  for (const s of specifiers) {
    const code = `import * as m from ${JSON.stringify(s)};\nexport default m;\n${ALLOW_ALL}`;
    await t.rejects(VersionIsolate.load({ versionId: 'v', code }), { name: 'BundleValidationError' }, s);
  }
  const meta = `import { createMachine } from 'npm:xstate';
const keys = Object.keys(import.meta).join(',') + ':' + String(import.meta.url);
let dyn = 'pending', dynPart = 'pending';
import('statehold:harness').then(() => { dyn = 'imported'; }, () => { dyn = 'rejected'; });
import('./harness-base.js').then(() => { dynPart = 'imported'; }, () => { dynPart = 'rejected'; });
export default createMachine({ id: 'm', initial: 'a', context: () => ({ keys, dyn, dynPart }), states: { a: {} } });
${ALLOW_ALL}`;
  const vi = await VersionIsolate.load({ versionId: 'v', code: meta });
  t.teardown(() => vi.dispose());
  const c = vi.defaultContext();
  t.notMatch(String(c.keys), /\/work|node_modules|home/, `import.meta shows no host path: ${c.keys}`);
  t.equal(c.dyn, 'rejected');
  t.equal(c.dynPart, 'rejected', "a dynamic import of the harness's base is refused too");
});
