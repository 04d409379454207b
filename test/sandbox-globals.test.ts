import t from 'tap';
import { VersionIsolate } from '../src/sandbox/index.js';
import { importing } from './fixtures/sandbox/bundles.js';

// Each check runs inside the isolate at load; results come back through the lazy default context.
const CHECKS = `
const r = {};
function check(name, fn) { try { r[name] = fn(); } catch (e) { r[name] = 'threw ' + e.name + ': ' + e.message; } }
check('utf8', () => {
  const bytes = new TextEncoder().encode('héllo €𝄞');
  return [Array.from(bytes).length, new TextDecoder().decode(bytes), new TextDecoder().decode(new Uint8Array([0xff, 0x41]))];
});
check('base64', () => [btoa('hello world'), atob('aGVsbG8gd29ybGQ='), atob(' aGk= ')]);
check('btoaRange', () => btoa('€'));
check('url', () => {
  const u = new URL('HTTPS://User:Pw@Example.COM:443/a/./b/../c d?x=1&y=a+b#frag');
  return [u.href, u.protocol, u.username, u.host, u.port, u.pathname, u.search, u.hash, u.origin, u.searchParams.get('y')];
});
check('urlRelative', () => [
  new URL('../x?q#h', 'http://h.test/a/b/c').href,
  new URL('//other.test/p', 'https://h.test/a').href,
  new URL('?only', 'http://h.test/a/b').href,
  new URL('mailto:someone@example.com').pathname,
  new URL('http://h.test:8080').port,
  String(new URL('http://h.test/ä')),
]);
check('urlInvalid', () => { try { new URL('not a url'); return 'parsed'; } catch (e) { return e.name; } });
check('urlMutate', () => {
  const u = new URL('http://h.test/p');
  u.searchParams.append('a b', 'c&d');
  u.searchParams.set('z', '1');
  u.hash = 'x';
  u.pathname = '/new path';
  return u.href;
});
check('params', () => {
  const p = new URLSearchParams('?a=1&b=2&a=3');
  p.delete('b');
  p.sort();
  return [p.getAll('a'), p.toString(), [...new URLSearchParams({ x: 'y z' })].join(';'), p.has('a'), p.size];
});
check('crypto', () => {
  const a = crypto.getRandomValues(new Uint8Array(32));
  const b = crypto.getRandomValues(new Uint32Array(4));
  return [/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(crypto.randomUUID()),
    a.some((x) => x !== 0), b.length, crypto.randomUUID() !== crypto.randomUUID()];
});
check('clone', () => {
  const src = { d: new Date(5), m: new Map([[1, { s: new Set([2]) }]]), arr: [1, 2] };
  src.self = src;
  const c = structuredClone(src);
  return [c !== src, c.self === c, c.d instanceof Date && c.d.getTime(), c.m.get(1).s.has(2), c.arr];
});
check('cloneFn', () => structuredClone({ f() {} }));
check('microtask', () => { let x = 0; queueMicrotask(() => { r.microtaskRan = true; }); return typeof queueMicrotask; });
export default createMachine({
  id: 'g', initial: 'a', context: () => ({ r }),
  states: { a: { on: {
    TICK: { actions: () => { r.ticks = 0; r.iv = setInterval(() => { r.ticks++; if (r.ticks === 3) clearInterval(r.iv); }, 100); } },
  } } },
});
`;

t.test('web-standard globals behave', async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'v', code: importing(CHECKS) });
  t.teardown(() => vi.dispose());
  const r = (vi.defaultContext() as { r: Record<string, unknown> }).r;
  t.same(r.utf8, [14, 'héllo €𝄞', '\ufffdA']);
  t.same(r.base64, ['aGVsbG8gd29ybGQ=', 'hello world', 'hi']);
  t.match(r.btoaRange, /threw InvalidCharacterError/);
  t.same(r.url, [
    'https://User:Pw@example.com/a/c%20d?x=1&y=a+b#frag',
    'https:',
    'User',
    'example.com',
    '',
    '/a/c%20d',
    '?x=1&y=a+b',
    '#frag',
    'https://example.com',
    'a b',
  ]);
  t.same(r.urlRelative, [
    'http://h.test/a/x?q#h',
    'https://other.test/p',
    'http://h.test/a/b?only',
    'someone@example.com',
    '8080',
    'http://h.test/%C3%A4',
  ]);
  t.equal(r.urlInvalid, 'TypeError');
  t.equal(r.urlMutate, 'http://h.test/new%20path?a+b=c%26d&z=1#x');
  t.same(r.params, [['1', '3'], 'a=1&a=3', 'x,y z', true, 2]);
  t.same(r.crypto, [true, true, 4, true]);
  t.same(r.clone, [true, true, 5, true, [1, 2]]);
  t.match(r.cloneFn, /threw DataCloneError/);
  t.equal(r.microtaskRan, true);

  // setInterval inside an actor runs on the host clock
  vi.start('k', { context: {} }, { nowMs: 0 });
  let s = vi.send('k', { type: 'TICK' }, 0);
  t.same(
    s.pendingTimers.map((p) => [p.kind, p.dueAt]),
    [['callback', 100]],
  );
  s = vi.advance('k', 1000);
  t.same(s.pendingTimers, [], 'cleared after the third tick');
  t.equal((vi.defaultContext() as { r: Record<string, unknown> }).r.ticks, 3);
});
