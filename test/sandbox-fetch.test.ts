import { createHash, createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { SandboxTimeoutError, VersionIsolate, type StepResult } from '../src/sandbox/index.js';
import type { EgressOptions } from '../src/sandbox/egress-policy.js';
import { importing } from './fixtures/sandbox/bundles.js';

// ---- a loopback HTTP server ----
const hanging = new Set<http.ServerResponse>();
let slowHits = 0;
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const url = new URL(req.url ?? '/', 'http://x');
    switch (url.pathname) {
      case '/json':
        res.writeHead(200, { 'content-type': 'application/json', 'x-multi': 'a' });
        res.end(JSON.stringify({ hello: 'world', n: 42 }));
        return;
      case '/echo':
        res.writeHead(201, 'Made It', { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'] });
        res.end(
          JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), query: url.search }),
        );
        return;
      case '/hang':
        hanging.add(res);
        return;
      case '/slow':
        slowHits++;
        setTimeout(() => res.end('"slow"'), 300);
        return;
      case '/big':
        res.writeHead(200, { 'content-type': 'text/plain' });
        for (let i = 0; i < 10; i++) res.write('x'.repeat(500));
        res.end();
        return;
      case '/big-declared':
        res.writeHead(200, { 'content-length': '5000' });
        res.end('y'.repeat(5000));
        return;
      case '/gzip':
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        res.end(gzipSync(JSON.stringify({ zipped: true })));
        return;
      case '/hop':
        res.writeHead(302, { location: '/json' });
        res.end();
        return;
      case '/to-private':
        res.writeHead(302, { location: 'http://10.0.0.1/secret' });
        res.end();
        return;
      case '/to-metadata':
        res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' });
        res.end();
        return;
      default:
        res.writeHead(404);
        res.end('no');
    }
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
const base = `http://127.0.0.1:${port}`;
t.teardown(async () => {
  for (const res of hanging) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

// ---- helpers ----
const ALLOWED: EgressOptions = { allow: [`127.0.0.1:${port}`], timeoutMs: 5000, maxResponseBytes: 100_000 };

async function load(code: string, egress?: EgressOptions, cpuLimitMs?: number): Promise<VersionIsolate> {
  const vi = await VersionIsolate.load({
    versionId: 'v-fetch',
    code,
    ...(egress ? { egress } : {}),
    ...(cpuLimitMs ? { cpuLimitMs } : {}),
  });
  t.teardown(() => vi.dispose());
  return vi;
}

/** The runtime's settle loop in small: wait for host activity (or a due timer), then advance. */
async function settle(vi: VersionIsolate, key: string, first: StepResult, budgetMs = 5000): Promise<StepResult> {
  const deadline = Date.now() + budgetMs;
  let r = first;
  while ((r.runningChildren.length > 0 || r.pendingHostCalls > 0) && Date.now() < deadline) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([vi.nextActivity(), new Promise((resolve) => (timer = setTimeout(resolve, deadline - Date.now())))]);
    clearTimeout(timer);
    r = vi.advance(key, Date.now());
  }
  return r;
}

/** A machine that invokes `source` (an expression of ctx) and records onDone data or the onError message. */
const invoking = (source: string) =>
  importing(`
export default createMachine({
  id: 'f', initial: 'loading', context: { url: '', result: null, error: null },
  states: {
    loading: { invoke: { src: (ctx) => ${source},
      onDone: { target: 'done', actions: assign({ result: (_, e) => e.data }) },
      onError: { target: 'failed', actions: assign({ error: (_, e) => ({ name: e.data && e.data.name, message: e.data && e.data.message,
        isTypeError: e.data instanceof TypeError, stack: String(e.data && e.data.stack) }) }) } } },
    done: {}, failed: {},
  },
});`);

const FETCH_JSON = invoking(`fetch(ctx.url).then((r) => r.json().then((body) => ({ status: r.status, ok: r.ok, body,
  type: r.headers.get('content-type'), url: r.url, redirected: r.redirected })))`);

async function run(vi: VersionIsolate, url: string, key = 'k'): Promise<StepResult> {
  return settle(vi, key, vi.start(key, { context: { url } }));
}

// ---- tests ----
t.test('loopback is refused by default; onError names the reason; nothing of the host leaks', async (t) => {
  const vi = await load(FETCH_JSON);
  const first = vi.start('k', { context: { url: `${base}/json` } });
  t.equal(first.pendingHostCalls, 1, 'the fetch is in flight for this actor');
  t.equal(first.runningChildren.length, 1);
  const r = await settle(vi, 'k', first);
  t.equal(r.state, 'failed');
  t.equal(r.pendingHostCalls, 0);
  const error = r.context.error as { name: string; message: string; isTypeError: boolean; stack: string };
  t.equal(error.message, 'fetch failed: destination 127.0.0.1 is a loopback address and not in the allow-list');
  t.equal(error.name, 'TypeError');
  t.equal(error.isTypeError, true, 'an isolate TypeError');
  t.notMatch(error.stack, /node_modules|\/work\/|host-fetch|undici/, "the stack is the isolate's own");
});

t.test('allow-listed 127.0.0.1:<port> succeeds with parsed JSON', async (t) => {
  const vi = await load(FETCH_JSON, ALLOWED);
  const r = await run(vi, `${base}/json`);
  t.equal(r.state, 'done');
  t.same(r.context.result, {
    status: 200,
    ok: true,
    body: { hello: 'world', n: 42 },
    type: 'application/json',
    url: `${base}/json`,
    redirected: false,
  });
});

t.test('a host name resolving to loopback (localhost) is refused', async (t) => {
  const vi = await load(FETCH_JSON);
  const r = await run(vi, `http://localhost:${port}/json`);
  t.equal(r.state, 'failed');
  t.match(
    (r.context.error as { message: string }).message,
    /^fetch failed: destination localhost \((127\.0\.0\.1|::1)\) is a loopback address and not in the allow-list$/,
  );
});

t.test('odd IPv4 literal forms and mapped IPv6 of loopback are refused', async (t) => {
  const vi = await load(FETCH_JSON);
  for (const [i, url] of [
    `http://2130706433:${port}/json`,
    `http://0x7f.1:${port}/json`,
    `http://[::ffff:127.0.0.1]:${port}/json`,
  ].entries()) {
    const r = await run(vi, url, `odd-${i}`);
    t.equal(r.state, 'failed', url);
    t.match((r.context.error as { message: string }).message, /loopback address and not in the allow-list/, url);
  }
});

t.test('POST with headers and a JSON body; form bodies; Headers iteration; set-cookie', async (t) => {
  const vi = await load(
    invoking(`(async () => {
      const h = new Headers([['X-One', '1']]);
      h.append('x-two', '2');
      const r = await fetch(new Request(ctx.url + '?q=1', { method: 'post', headers: h, body: JSON.stringify({ a: 1 }) }));
      const echo = await r.json();
      const names = []; r.headers.forEach((v, k) => names.push(k));
      const form = await (await fetch(ctx.url, { method: 'PUT', body: new URLSearchParams({ x: 'y z', w: '&' }) })).json();
      const bytes = await (await fetch(ctx.url, { method: 'POST', body: new Uint8Array([104, 105]), headers: { 'content-type': 'application/octet-stream' } })).json();
      return { status: r.status, statusText: r.statusText, method: echo.method, one: echo.headers['x-one'], two: echo.headers['x-two'],
        ct: echo.headers['content-type'], body: echo.body, query: echo.query, names, cookies: r.headers.getSetCookie(),
        has: r.headers.has('Content-Type'), entries: [...r.headers].length > 0, used: r.bodyUsed,
        form: [form.method, form.body, form.headers['content-type']], bytes: [bytes.body, bytes.headers['content-type']] };
    })()`),
    ALLOWED,
  );
  const r = await run(vi, `${base}/echo`);
  t.equal(r.state, 'done', JSON.stringify(r.context.error));
  t.match(r.context.result, {
    status: 201,
    statusText: 'Made It',
    method: 'POST',
    one: '1',
    two: '2',
    ct: 'text/plain;charset=UTF-8',
    body: '{"a":1}',
    query: '?q=1',
    cookies: ['a=1', 'b=2'],
    has: true,
    entries: true,
    used: true,
    form: ['PUT', 'x=y+z&w=%26', 'application/x-www-form-urlencoded;charset=UTF-8'],
    bytes: ['hi', 'application/octet-stream'],
  });
  t.ok((r.context.result as { names: string[] }).names.includes('set-cookie'));
});

t.test('gzip bodies are decoded; redirects are followed and re-checked', async (t) => {
  const vi = await load(FETCH_JSON, ALLOWED);
  let r = await run(vi, `${base}/gzip`, 'gz');
  t.match(r.context.result, { body: { zipped: true } });
  r = await run(vi, `${base}/hop`, 'hop');
  t.match(r.context.result, { status: 200, body: { hello: 'world' }, url: `${base}/json`, redirected: true });
  r = await run(vi, `${base}/to-private`, 'priv');
  t.equal(r.state, 'failed');
  t.equal(
    (r.context.error as { message: string }).message,
    'fetch failed: destination 10.0.0.1 is a private address and not in the allow-list',
  );
  r = await run(vi, `${base}/to-metadata`, 'meta');
  t.equal(
    (r.context.error as { message: string }).message,
    'fetch failed: destination 169.254.169.254 is a metadata address and not in the allow-list',
  );
});

t.test('the connection is pinned to the checked addresses (DNS answered once, by the checked lookup)', async (t) => {
  const asked: string[] = [];
  const vi = await VersionIsolate.load({
    versionId: 'v-pin',
    code: FETCH_JSON,
    egress: { allow: [`pinned.invalid:${port}`], timeoutMs: 3000, maxResponseBytes: 100_000 },
    dnsLookup: async (host) => {
      asked.push(host);
      if (host === 'pinned.invalid') return [{ address: '127.0.0.1', family: 4 }];
      return [
        { address: '93.184.216.34', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ];
    },
  });
  t.teardown(() => vi.dispose());
  // .invalid never resolves in real DNS: reaching the server proves undici connected to the pinned address
  let r = await run(vi, `http://pinned.invalid:${port}/json`, 'pin');
  t.match(r.context.result, { status: 200, body: { hello: 'world' } });
  t.same(asked, ['pinned.invalid'], 'resolved once, by the policy');
  r = await run(vi, `http://rebinding.test:${port}/json`, 'rebind');
  t.equal(
    (r.context.error as { message: string }).message,
    'fetch failed: destination rebinding.test (127.0.0.1) is a loopback address and not in the allow-list',
    'one bad address is enough',
  );
});

t.test('a server that never answers: the per-call timeout rejects', async (t) => {
  const vi = await load(FETCH_JSON, { ...ALLOWED, timeoutMs: 300 });
  const started = Date.now();
  const r = await run(vi, `${base}/hang`);
  t.equal(r.state, 'failed');
  t.equal((r.context.error as { message: string }).message, 'fetch failed: timed out after 300 ms');
  t.ok(Date.now() - started < 3000);
});

t.test('a response larger than the limit rejects (streamed or declared)', async (t) => {
  const vi = await load(FETCH_JSON, { ...ALLOWED, maxResponseBytes: 1000 });
  for (const path of ['/big', '/big-declared']) {
    const r = await run(vi, `${base}${path}`, path);
    t.equal(r.state, 'failed', path);
    t.equal((r.context.error as { message: string }).message, 'fetch failed: response body exceeds the limit of 1000 bytes', path);
  }
});

t.test('non-http schemes and bodies on GET are refused in the isolate', async (t) => {
  const vi = await load(invoking(`fetch(ctx.url)`), ALLOWED);
  let r = await run(vi, 'file:///etc/passwd', 'file');
  t.match(r.context.error, { name: 'TypeError', message: /only http: and https:/ });
  const vi2 = await load(invoking(`fetch(ctx.url, { body: 'x' })`), ALLOWED);
  r = await run(vi2, `${base}/json`, 'getbody');
  t.match(r.context.error, { name: 'TypeError', message: /GET request cannot have a body/ });
});

t.test("stopping children drops the actor's fetches: results never reach the actor", async (t) => {
  const vi = await load(FETCH_JSON, ALLOWED);
  const before = slowHits;
  const first = vi.start('k', { context: { url: `${base}/slow` } });
  t.equal(first.pendingHostCalls, 1);
  t.equal(vi.hostCallsInFlight, 1);
  t.same(vi.stopChildren('k'), [{ id: 'f.loading:invocation[0]' }]);
  t.equal(vi.hostCallsInFlight, 0, 'aborted on the host');
  await new Promise((resolve) => setTimeout(resolve, 500));
  const r = vi.advance('k', Date.now());
  t.equal(r.state, 'loading', 'no onDone/onError was delivered');
  t.equal(r.pendingHostCalls, 0);
  t.ok(slowHits <= before + 1);
  // stop(key) and a rebuilt actor with the same key: the old fetch's result does not reach the new one
  const again = vi.start('k2', { context: { url: `${base}/slow` } });
  t.equal(again.pendingHostCalls, 1);
  vi.stop('k2');
  const fresh = vi.start('k2', { context: { url: `${base}/json` } });
  t.equal(fresh.pendingHostCalls, 1, "only the new actor's fetch");
  const done = await settle(vi, 'k2', fresh);
  t.match(done.context.result, { body: { hello: 'world' } });
});

t.test('at most 16 fetches in flight per isolate', async (t) => {
  const vi = await load(
    invoking(`Promise.allSettled(Array.from({ length: 17 }, () => fetch(ctx.url))).then((all) =>
      all.map((s) => s.status === 'fulfilled' ? s.value.status : s.reason.message))`),
    ALLOWED,
  );
  const r = await run(vi, `${base}/json`);
  const list = r.context.result as (number | string)[];
  t.equal(list.filter((x) => x === 200).length, 16);
  t.match(list[16], /too many fetches in flight \(at most 16 per machine version\)/);
});

t.test('machine code looping in a fetch continuation hits the CPU limit; the actor is discarded', async (t) => {
  const vi = await load(invoking(`fetch(ctx.url).then(() => { for (;;) {} })`), ALLOWED, 200);
  const first = vi.start('k', { context: { url: `${base}/json` } });
  await vi.nextActivity();
  t.throws(() => vi.advance('k', Date.now()), SandboxTimeoutError);
  t.equal(vi.healthy, true, 'the isolate survives');
  t.equal(first.state, 'loading');
});

t.test('fetch is not available to top-level code; Headers/Response work there', async (t) => {
  const vi = await load(
    importing(`
const r = {};
fetch('http://127.0.0.1:1/').then(() => { r.top = 'resolved'; }, (e) => { r.top = e.message; });
const h = new Headers({ B: '2', a: '1' }); h.append('a', '3');
r.headers = [...h];
const resp = new Response('{"x":1}', { status: 202, headers: { 'content-type': 'application/json' } });
r.resp = [resp.status, resp.ok, resp.headers.get('content-type')];
resp.json().then((j) => { r.json = j; return resp.text(); }).catch((e) => { r.second = e.message; });
r.jsonResp = Response.json({ a: 1 }).headers.get('content-type');
export default createMachine({ id: 'x', initial: 'a', context: () => ({ r }), states: { a: {} } });`),
    ALLOWED,
  );
  const r = (vi.defaultContext() as { r: Record<string, unknown> }).r;
  t.equal(r.top, "fetch failed: fetch is not available while the bundle's top-level code runs");
  t.same(r.headers, [
    ['a', '1, 3'],
    ['b', '2'],
  ]);
  t.same(r.resp, [202, true, 'application/json']);
  t.same(r.json, { x: 1 });
  t.match(r.second, /already been read/);
  t.equal(r.jsonResp, 'application/json');
});

t.test('crypto.subtle: digests and HMAC match node:crypto', async (t) => {
  const vi = await load(
    invoking(`(async () => {
      const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');
      const enc = new TextEncoder();
      const digests = {};
      for (const h of ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512']) digests[h] = hex(await crypto.subtle.digest(h, enc.encode('abc')));
      const key = await crypto.subtle.importKey('raw', enc.encode('secret-key'), { name: 'HMAC', hash: 'SHA-256' }, true, ['sign', 'verify']);
      const sig = await crypto.subtle.sign('HMAC', key, enc.encode('message'));
      const ok = await crypto.subtle.verify('HMAC', key, sig, enc.encode('message'));
      const bad = await crypto.subtle.verify({ name: 'HMAC' }, key, sig, enc.encode('messagE'));
      const raw = new TextDecoder().decode(await crypto.subtle.exportKey('raw', key));
      const gen = await crypto.subtle.generateKey({ name: 'HMAC', hash: { name: 'SHA-512' } }, false, ['sign']);
      let unsupported; try { await crypto.subtle.encrypt(); } catch (e) { unsupported = e.name; }
      let noExport; try { await crypto.subtle.exportKey('raw', gen); } catch (e) { noExport = e.name; }
      return { digests, sig: hex(sig), ok, bad, raw, genBits: gen.algorithm.length, keyType: Object.prototype.toString.call(key),
        unsupported, noExport, sigIsBuffer: sig instanceof ArrayBuffer };
    })()`),
  );
  const r = vi.start('k', { context: {} });
  t.equal(r.state, 'done', 'settled in the same step: crypto is synchronous on the host');
  const hash = (alg: string) => createHash(alg).update('abc').digest('hex');
  t.same(r.context.result, {
    digests: {
      'SHA-1': hash('sha1'),
      'SHA-256': 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
      'SHA-384': hash('sha384'),
      'SHA-512': hash('sha512'),
    },
    sig: createHmac('sha256', 'secret-key').update('message').digest('hex'),
    ok: true,
    bad: false,
    raw: 'secret-key',
    genBits: 1024,
    keyType: '[object CryptoKey]',
    unsupported: 'NotSupportedError',
    noExport: 'InvalidAccessError',
    sigIsBuffer: true,
  });
});
