/**
 * HTTP edge cases at the front end (issue 20, item 2), on raw sockets.
 *
 * Most of these are decided by uWebSockets.js's HTTP parser before any of the node's code runs, and
 * the build in use (uWS.js 20.30, uWebSockets 20.43) answers none of them: it closes the connection or
 * holds it until its idle timeout. Its limits are compiled in (a 4,096-byte buffer for an unfinished
 * request head, 50 header slots, a fixed list of nine methods) and this build reads no environment
 * variable for them (no UWS_HTTP_MAX_HEADERS_SIZE). A front end of our own in front of uWS could answer
 * them, but it would carry every request through JavaScript (docs/configuration.md, HTTP limits). So these tests PIN
 * today's behaviour, as docs/configuration.md documents it: a change of uWS that answers them makes a test here fail,
 * and those docs and these pins are then updated together.
 */
import { connect } from 'node:net';
import t, { type Test } from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode();
t.teardown(() => node.stop());

/** How an exchange ended: an answer was read whole, the node closed (FIN or reset), or our wait ran out. */
interface Outcome {
  answer: string;
  /** 'answered': a whole response was read; 'closed': the node closed the connection; 'open': still open when the wait ran out. */
  end: 'answered' | 'closed' | 'open';
  ms: number;
  /** The socket error that ended it, if any (ECONNRESET, EPIPE). */
  error?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** True once `data` holds a whole response head and as many body bytes as its Content-Length says. */
const wholeResponse = (data: Buffer): boolean => {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) return false;
  const length = /\r\ncontent-length: *(\d+)/i.exec(data.subarray(0, headEnd).toString('latin1'));
  return data.length - (headEnd + 4) >= Number(length?.[1] ?? 0);
};

/**
 * Writes `parts` on a new connection, `gapMs` apart (Nagle off, so each part leaves as its own segment
 * and the node reads it on its own), and reads until a whole response, the node's close, or `waitMs`.
 */
const exchange = (parts: string[], { gapMs = 25, waitMs = 3_000 } = {}): Promise<Outcome> =>
  new Promise((resolve) => {
    const started = Date.now();
    let data = Buffer.alloc(0);
    let outcome: Outcome['end'] | undefined;
    let error: string | undefined;
    const writeParts = async (): Promise<void> => {
      for (const [i, part] of parts.entries()) {
        if (socket.destroyed || socket.writableEnded || outcome) return;
        if (i > 0) await sleep(gapMs);
        if (socket.destroyed || socket.writableEnded || outcome) return;
        socket.write(part);
      }
    };
    // (a write on a socket that failed meanwhile reports through its 'error' handler below)
    const socket = connect({ port: node.port, host: '127.0.0.1', noDelay: true }, () => void writeParts());
    const timer = setTimeout(() => {
      outcome ??= 'open';
      socket.destroy();
    }, waitMs);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (wholeResponse(data)) {
        outcome ??= 'answered';
        socket.destroy();
      }
    });
    socket.on('end', () => (outcome ??= 'closed'));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code;
      outcome ??= 'closed';
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ answer: data.toString('latin1'), end: outcome ?? 'closed', ms: Date.now() - started, ...(error ? { error } : {}) });
    });
  });

/** `text` cut into pieces of `size` characters. */
const pieces = (text: string, size: number): string[] =>
  Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));

/** A GET /health whose head (request line, fields, blank line) is exactly `bytes` long, padded with a long x-statebacked-act. */
const headOf = (bytes: number): string => {
  const bare = 'GET /health HTTP/1.1\r\nhost: x\r\nx-statebacked-act: \r\n\r\n';
  return `GET /health HTTP/1.1\r\nhost: x\r\nx-statebacked-act: ${'a'.repeat(bytes - bare.length)}\r\n\r\n`;
};

const withFields = (count: number): string =>
  `GET /health HTTP/1.1\r\nhost: x\r\n${Array.from({ length: count - 1 }, (_, i) => `x-field-${i}: ${i}\r\n`).join('')}\r\n`;

/** Served: the usual 200 with its JSON body. */
const served = (t: Test, outcome: Outcome, what: string) => {
  t.equal(outcome.end, 'answered', `${what}: answered`);
  t.match(outcome.answer, /^HTTP\/1\.1 200 OK\r\n/, `${what}: 200`);
  t.match(outcome.answer, /\r\n\r\n\{"status":"ok"\}$/, `${what}: with the JSON body`);
};

/** PINNED: closed by uWS at once, not one byte of answer. */
const closedUnanswered = (t: Test, outcome: Outcome, what: string) => {
  t.equal(outcome.end, 'closed', `${what}: the node closes the connection (${outcome.error ?? 'FIN'})`);
  t.equal(outcome.answer, '', `${what}: without any answer`);
  t.ok(outcome.ms < 2_500, `${what}: at once (${outcome.ms} ms)`);
};

t.test('request heads: up to 4,096 bytes however segmented; more only when they arrive in one read', async (t) => {
  served(t, await exchange([headOf(16_384)]), '16 KB head in one write');
  served(t, await exchange(pieces(headOf(4_096), 1_000)), '4,096-byte head in 1,000-byte segments');
  served(t, await exchange(pieces(withFields(30), 40), { gapMs: 5 }), 'a small head in 40-byte segments');
  // PINNED (issue 20 asked for heads up to ≥ 16 KB served however segmented, 431 beyond): uWS keeps at most
  // 4,096 bytes of a head it has not seen the end of, and closes the connection when that fills.
  closedUnanswered(t, await exchange(pieces(headOf(4_097), 1_000)), '4,097-byte head in 1,000-byte segments');
  closedUnanswered(t, await exchange(pieces(headOf(16_384), 1_460)), '16 KB head in 1,460-byte segments (as over Ethernet)');
  const bigToken = `GET /machines HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${'e'.repeat(6_000)}\r\n\r\n`;
  closedUnanswered(t, await exchange(pieces(bigToken, 1_460)), 'a 6 KB authorization header in segments');
  t.equal((await call(node.url, 'GET', '/health')).status, 200, 'the node is fine afterwards');
});

t.test('methods: the nine uWS knows reach the router; any other closes the connection unanswered', async (t) => {
  const trace = await exchange(['TRACE /health HTTP/1.1\r\nhost: x\r\n\r\n']);
  t.match(trace.answer, /^HTTP\/1\.1 405 /, 'TRACE, a method uWS knows: 405 from the router');
  t.match(trace.answer, /\r\nallow: GET, HEAD\r\n/, 'with Allow');
  t.match(trace.answer, /"code":"invalid-parameter"/, 'and the JSON error');
  const onApi = await exchange(['TRACE /http-api/org_x/machines/m/api HTTP/1.1\r\nhost: x\r\n\r\n']);
  t.match(onApi.answer, /\r\nallow: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS\r\n/, 'a route that takes HEAD itself names it once');
  // PINNED (issue 20 asked for 405 with Allow, or 501): uWS routes only GET, POST, HEAD, PUT, DELETE,
  // CONNECT, OPTIONS, TRACE and PATCH, case-sensitively, and closes the connection on any other method.
  for (const method of ['PROPFIND', 'QUERY', 'get', 'Post']) {
    closedUnanswered(t, await exchange([`${method} /health HTTP/1.1\r\nhost: x\r\n\r\n`]), method);
  }
});

t.test('HTTP/1.1 without Host, with other header fields: closed unanswered', async (t) => {
  // PINNED (issue 20 asked for 400, RFC 9112 §3.2): uWS's parser refuses the request and closes.
  closedUnanswered(t, await exchange(['GET /health HTTP/1.1\r\naccept: */*\r\n\r\n']), 'no Host');
  served(t, await exchange(['GET /health HTTP/1.1\r\nhost:\r\n\r\n']), 'an empty Host');
});

t.test('a 1 MiB URL or header field: the connection is closed (reset) unanswered', async (t) => {
  served(t, await exchange([`GET /health?pad=${'a'.repeat(16_000)} HTTP/1.1\r\nhost: x\r\n\r\n`]), 'a 16 KB URL in one write');
  // PINNED (issue 20 asked for 414 / 431): more than one read's worth of head, so uWS closes as above;
  // the client, still writing, usually sees a reset.
  closedUnanswered(t, await exchange([`GET /health?pad=${'a'.repeat(1 << 20)} HTTP/1.1\r\nhost: x\r\n\r\n`]), '1 MiB URL');
  closedUnanswered(t, await exchange([headOf(1 << 20)]), '1 MiB header field');
  t.equal((await call(node.url, 'GET', '/health')).status, 200, 'the node is fine afterwards');
});

t.test(
  'held unanswered until the idle timeout: more than 48 header fields, no header field, a field name with "_", HTTP/1.0, a target that is not a path',
  async (t) => {
    served(t, await exchange([withFields(48)]), '48 header fields (Host included)');
    served(t, await exchange(['GET /health HTTP/1.1\r\nhost: x\r\nx-foo: 1\r\n\r\n']), 'a field name with "-"');
    // PINNED (issue 20 asked for 431 or serving them; RFC 9112 asks 400 for no Host and lets a server
    // answer HTTP/1.0 and absolute-form targets): uWS's parser takes each of these for a head still
    // arriving and waits for the rest, until its idle timeout (10 s, checked every 4 s) closes the
    // connection. They wait side by side, so the test takes one timeout.
    const held = {
      '49 header fields': withFields(49),
      '100 header fields': withFields(100),
      'HTTP/1.1 without any header field': 'GET /health HTTP/1.1\r\n\r\n',
      // (uWS takes only letters, digits and '-' in field names; RFC 9110 allows '_' too)
      'a header field name with an underscore': 'GET /health HTTP/1.1\r\nhost: x\r\nx_foo: 1\r\n\r\n',
      'HTTP/1.0': 'GET /health HTTP/1.0\r\nhost: x\r\n\r\n',
      'an absolute-form target': 'GET http://x/health HTTP/1.1\r\nhost: x\r\n\r\n',
      'an asterisk-form target': 'OPTIONS * HTTP/1.1\r\nhost: x\r\n\r\n',
    };
    const outcomes = await Promise.all(Object.values(held).map((head) => exchange([head], { waitMs: 25_000 })));
    for (const [i, what] of Object.keys(held).entries()) {
      const outcome = outcomes[i] as Outcome;
      t.equal(outcome.answer, '', `${what}: no answer`);
      t.equal(outcome.end, 'closed', `${what}: the node closes the connection in the end`);
      t.ok(outcome.ms >= 5_000 && outcome.ms < 20_000, `${what}: at its idle timeout (${outcome.ms} ms)`);
    }
    t.equal((await call(node.url, 'GET', '/health')).status, 200, 'the node is fine afterwards');
  },
);
