import t from 'tap';
import { VersionIsolate, type CapturedLog } from '../src/sandbox/index.js';
import { importing } from './fixtures/sandbox/bundles.js';

// Top-level code and actions try the usual ways out; results are exposed through the lazy context.
const PROBES = `
const probes = {};
function describe(v) {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (typeof v === 'object' || typeof v === 'function') return typeof v + ':' + Object.getOwnPropertyNames(v).slice(0, 8).join(',');
  return String(v);
}
function probe(name, fn) {
  try { probes[name] = describe(fn()); } catch (e) { probes[name] = 'threw:' + (e && e.name); }
}
probe('process', () => typeof process);
probe('require', () => typeof require);
probe('module', () => typeof module + typeof exports + typeof __dirname);
probe('globalCtor', () => globalThis.constructor.constructor('return typeof process + typeof require')());
probe('functionCtor', () => Function('return typeof process + typeof require + typeof global')());
probe('thisAtTop', () => this);
probe('sloppyThis', () => Function('return this')() === globalThis);
probe('ivm', () => typeof ivm + typeof _ivm + typeof isolatedVm);
probe('hidden', () => Object.getOwnPropertyNames(globalThis).filter((n) => /statehold|ivm|host/i.test(n)).join(','));
probe('consoleCtor', () => console.log.constructor('return typeof process')());
probe('cryptoCtor', () => crypto.getRandomValues.constructor('return typeof process')());
probe('errorCtor', () => { try { null.x; } catch (e) { return e.constructor.constructor('return typeof process')(); } });
probe('stackTrace', () => { const e = {}; Error.captureStackTrace && Error.captureStackTrace(e); return String(e.stack).includes('/work/') ; });
probe('fetch', () => typeof fetch + typeof XMLHttpRequest + typeof WebSocket + typeof Deno);
probe('fetchCtor', () => fetch.constructor('return typeof process')() + Headers.constructor('return typeof require')());
probe('subtleCtor', () => crypto.subtle.digest.constructor('return typeof process')());
probe('fetchOwn', () => Object.getOwnPropertyNames(fetch).sort().join(','));
probe('ownProps', () => Object.getOwnPropertyNames(globalThis).filter((n) => !/^[A-Z]/.test(n)).sort().join(','));
import('fs').then(() => { probes.dynImport = 'imported'; }, (e) => { probes.dynImport = 'rejected:' + e.message; });
import('npm:xstate').then(() => { probes.dynImportXstate = 'imported'; }, (e) => { probes.dynImportXstate = 'rejected'; });
export default createMachine({
  id: 'esc', initial: 'a', context: () => ({ probes }),
  states: { a: { on: {
    LOG: { actions: (ctx) => {
      const tricky = { get boom() { throw new Error('getter'); }, toJSON() { return 'x'; }, fn() {}, nested: { deep: [1, { a: 2 }] } };
      tricky.self = tricky;
      console.log('objects', tricky, new Error('an error'), new Map([['k', 1]]), 10n, undefined, Symbol('s'));
      console.warn(new Proxy({}, { ownKeys() { throw new Error('trap'); } }));
    } },
    THROW_ODD: { actions: () => { throw new Proxy({}, { get() { throw new Error('proxy trap'); } }); } },
  } } },
});
`;

t.test('machine code cannot reach the host', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await VersionIsolate.load({ versionId: 'v', code: importing(PROBES), onLog: (e) => logs.push(e) });
  t.teardown(() => vi.dispose());
  const probes = (vi.defaultContext() as { probes: Record<string, string> }).probes;
  t.same(
    {
      process: probes.process,
      require: probes.require,
      module: probes.module,
      globalCtor: probes.globalCtor,
      functionCtor: probes.functionCtor,
      thisAtTop: probes.thisAtTop,
      sloppyThis: probes.sloppyThis,
      ivm: probes.ivm,
      hidden: probes.hidden,
      consoleCtor: probes.consoleCtor,
      cryptoCtor: probes.cryptoCtor,
      errorCtor: probes.errorCtor,
      stackTrace: probes.stackTrace,
      fetch: probes.fetch,
      fetchCtor: probes.fetchCtor,
      subtleCtor: probes.subtleCtor,
      fetchOwn: probes.fetchOwn,
      dynImport: probes.dynImport,
      dynImportXstate: probes.dynImportXstate,
    },
    {
      process: 'undefined',
      require: 'undefined',
      module: 'undefinedundefinedundefined',
      globalCtor: 'undefinedundefined',
      functionCtor: 'undefinedundefinedundefined',
      thisAtTop: 'undefined',
      sloppyThis: 'true',
      ivm: 'undefinedundefinedundefined',
      hidden: '',
      consoleCtor: 'undefined',
      cryptoCtor: 'undefined',
      errorCtor: 'undefined',
      stackTrace: 'false',
      // fetch is the isolate's own function (the host callback stays in its closure)
      fetch: 'functionundefinedundefinedundefined',
      fetchCtor: 'undefinedundefined',
      subtleCtor: 'undefined',
      fetchOwn: 'length,name,prototype',
      dynImport: 'rejected:Not supported',
      dynImportXstate: 'rejected',
    },
  );
  t.comment(`globals seen by machine code: ${probes.ownProps}`);
  t.notMatch(probes.ownProps ?? '', /process|require|global,|setImmediate|Buffer/);

  // logging objects gives host-side plain copies, never references
  vi.start('k', { context: {} });
  vi.send('k', { type: 'LOG' });
  t.equal(logs.length, 2);
  const [first, second] = logs;
  t.match(first, { level: 'log', instanceKey: 'k', versionId: 'v' });
  const args = first?.args ?? [];
  t.equal(args[0], 'objects');
  t.match(args[1], { boom: '[Unserialisable]', fn: '[Function fn]', nested: { deep: [1, { a: 2 }] }, self: '[Circular]' });
  t.equal(Object.getPrototypeOf(args[1]), Object.prototype, 'a plain host object');
  t.match(args[2], { name: 'Error', message: 'an error' });
  t.same([args[3], args[4], args[5], args[6]], [{ k: 1 }, '10n', null, 'Symbol(s)']);
  t.match(second, { level: 'warn', args: ['[Unserialisable]'] });

  // an exotic thrown value becomes a host string message
  t.throws(() => vi.send('k', { type: 'THROW_ODD' }), { name: 'MachineCodeError', message: /string|unprintable|thrown/ });
});
