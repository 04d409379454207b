import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { call, rawExchange } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--max-body-bytes', '4096'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

t.test('CORS: preflight and response headers', async (t) => {
  const preflight = await call(node.url, 'OPTIONS', '/machines', {
    headers: {
      origin: 'https://app.example.com',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type, x-statebacked-org-id, x-statebacked-act',
    },
  });
  t.equal(preflight.status, 204);
  t.equal(preflight.headers['access-control-allow-origin'], '*');
  for (const header of ['authorization', 'content-type', 'x-statebacked-org-id', 'x-statebacked-act']) {
    t.match(preflight.headers['access-control-allow-headers'], header);
  }
  t.match(preflight.headers['access-control-allow-methods'], 'DELETE');
  const normal = await call(node.url, 'GET', '/machines', { token: admin, headers: { origin: 'https://app.example.com' } });
  t.equal(normal.headers['access-control-allow-origin'], '*');
  const failed = await call(node.url, 'GET', '/machines', { headers: { origin: 'https://app.example.com' } });
  t.equal(failed.status, 403);
  t.equal(failed.headers['access-control-allow-origin'], '*', 'errors carry CORS headers too, so browsers can read them');
});

t.test('bodies: JSON whatever the content type, empty bodies, malformed JSON', async (t) => {
  const noType = await call(node.url, 'POST', '/machines', { token: admin, rawBody: '{"slug":"no-type"}' });
  t.equal(noType.status, 201, 'no content-type still parses as JSON');
  const textType = await call(node.url, 'POST', '/machines', {
    token: admin,
    rawBody: '{"slug":"text-type"}',
    headers: { 'content-type': 'text/plain' },
  });
  t.equal(textType.status, 201);
  const empty = await call(node.url, 'POST', '/orgs', { token: admin, headers: { 'content-type': 'application/json' } });
  t.equal(empty.status, 400, 'an empty JSON body is accepted as {} and then validated');
  t.equal(empty.body.parameter, 'name');
  const emptyGet = await call(node.url, 'GET', '/machines', { token: admin, headers: { 'content-type': 'application/json' } });
  t.equal(emptyGet.status, 200);
  const malformed = await call(node.url, 'POST', '/machines', {
    token: admin,
    rawBody: '{"slug":',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(malformed.status, 400);
  t.same(malformed.body, { error: malformed.body.error, code: 'invalid-parameter', parameter: 'body' });
  t.match(malformed.body.error, /not valid JSON/);
  const gzipped = await call(node.url, 'POST', '/machines', {
    token: admin,
    rawBody: gzipSync('{"slug":"gz"}'),
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
  });
  t.match(gzipped, {
    status: 400,
    body: { code: 'invalid-parameter', parameter: 'content-encoding', error: /gzip is not supported; send the JSON uncompressed/ },
  });
  const identity = await call(node.url, 'POST', '/machines', {
    token: admin,
    rawBody: '{"slug":"identity"}',
    headers: { 'content-encoding': 'identity' },
  });
  t.equal(identity.status, 201, 'identity is no encoding');
});

t.test('413 above the body limit, declared or streamed', async (t) => {
  const declared = await call(node.url, 'POST', '/machines', { token: admin, rawBody: `{"slug":"x","pad":"${'a'.repeat(5000)}"}` });
  t.equal(declared.status, 413);
  t.equal(declared.body.code, 'payload-too-large');
  const streamed = await new Promise<string>((resolve, reject) => {
    const socket = connect(node.port, '127.0.0.1', () => {
      socket.write(`POST /machines HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${admin}\r\ntransfer-encoding: chunked\r\n\r\n`);
      const chunk = 'a'.repeat(3000);
      socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (d) => {
      data += d.toString();
      if (data.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(data);
      }
    });
    socket.on('error', reject);
  });
  t.match(streamed, /^HTTP\/1\.1 413/);
  t.equal((await call(node.url, 'GET', '/health')).status, 200, 'the node is fine afterwards');
});

t.test('routing: unknown paths, wrong methods, encoded segments', async (t) => {
  const unknown = await call(node.url, 'GET', '/nope', { token: admin });
  t.equal(unknown.status, 404);
  t.equal(unknown.body.code, 'not-found');
  const wrong = await call(node.url, 'PATCH', '/machines', { token: admin });
  t.equal(wrong.status, 405);
  t.match(wrong.body.error, /GET, POST/);
  await call(node.url, 'POST', '/machines', { token: admin, body: { slug: 'enc-1' } });
  t.equal((await call(node.url, 'GET', '/machines/enc%2D1', { token: admin })).status, 200, 'path segments are percent-decoded');
  const badEscape = await call(node.url, 'GET', '/machines/%E0%A4%A', { token: admin });
  t.equal(badEscape.status, 400, 'a bad escape is a bad request, not a crash nor "not found"');
  t.same(badEscape.body, { error: 'path segment %E0%A4%A is not valid percent-encoding', code: 'invalid-parameter' });
});

t.test('aborted requests do not crash the node or leak answers', async (t) => {
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((resolve) => {
      const socket = connect(node.port, '127.0.0.1', () => {
        socket.write(`POST /machines HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${admin}\r\ncontent-length: 1000\r\n\r\n{"slug":`);
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 5);
      });
      socket.on('error', () => resolve());
    });
  }
  const health = await call(node.url, 'GET', '/health');
  t.equal(health.status, 200);
  t.same(health.body, { status: 'ok' });
  t.equal((await call(node.url, 'GET', '/machines', { token: admin })).status, 200);
});

/** Writes `text` on a new connection and collects what comes back until the peer closes or `ms` pass. */
const exchange = (text: string, ms = 1_500): Promise<string> => rawExchange(node.port, text, ms);

t.test('HEAD is answered like GET, without a body, and the connection stays usable', async (t) => {
  const answer = await exchange('HEAD /health HTTP/1.1\r\nhost: x\r\n\r\nGET /health HTTP/1.1\r\nhost: x\r\n\r\n');
  const split = answer.indexOf('\r\n\r\n') + 4;
  const [head, rest] = [answer.slice(0, split), answer.slice(split)];
  t.match(head, /^HTTP\/1\.1 200 /);
  t.match(head, /content-length: 15\r\n/i, 'with the length the GET body has');
  t.match(rest, /^HTTP\/1\.1 200 [^]*\r\n\r\n\{"status":"ok"\}$/, 'no body after it: the next answer on the connection follows at once');
  const missing = await call(node.url, 'HEAD', '/machines/none', { token: admin });
  t.equal(missing.status, 404);
  t.equal(missing.text, '');
  const wrong = await call(node.url, 'PATCH', '/health');
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.allow, 'GET, HEAD', '405 says what is allowed in Allow');
});

t.test('a HEAD answered does not hold up a graceful stop', async (t) => {
  const own = await startNode({ args: ['--drain-timeout-ms', '5000'] });
  await new Promise<string>((resolve) => {
    let data = '';
    const socket = connect(own.port, '127.0.0.1', () => socket.write('HEAD /health HTTP/1.1\r\nhost: x\r\n\r\n'));
    socket.on('data', (d) => {
      data += d.toString();
      if (data.includes('\r\n\r\n')) socket.end();
    });
    socket.on('close', () => resolve(data));
  });
  t.equal(await own.stop('SIGTERM'), 0);
  t.notMatch(own.output(), 'drain timeout passed');
});

t.test('a preflight with a body is answered and its connection closed, so the body is never read as a request', async (t) => {
  const smuggled = `POST /machines HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${admin}\r\ncontent-length: 17\r\n\r\n{"slug":"opt-1"}`;
  const answer = await exchange(
    `OPTIONS /machines HTTP/1.1\r\nhost: x\r\ncontent-length: ${Buffer.byteLength(smuggled)}\r\n\r\n${smuggled}`,
  );
  t.match(answer, /^HTTP\/1\.1 204 /);
  t.notMatch(answer, /HTTP\/1\.1 201/, 'the body was not taken for a request');
  t.equal((await call(node.url, 'GET', '/machines/opt-1', { token: admin })).status, 404);
});

t.test('conflicting Content-Length headers: the connection is closed, and nothing sent on it after them runs', async (t) => {
  const first = `POST /machines HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${admin}\r\ncontent-length: 15\r\ncontent-length: 200\r\n\r\n{"slug":"cl-1"}`;
  const next = `POST /machines HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${admin}\r\ncontent-length: 15\r\n\r\n{"slug":"cl-2"}`;
  t.equal(await exchange(first + next), '', 'no answer: closed');
  for (const slug of ['cl-1', 'cl-2'])
    t.equal((await call(node.url, 'GET', `/machines/${slug}`, { token: admin })).status, 404, `${slug} was not created`);
  t.equal((await call(node.url, 'GET', '/health')).status, 200);
});

t.test('a credential header given twice is a 400 naming it, whichever value comes first', async (t) => {
  for (const [name, values] of [
    ['authorization', [`Bearer ${admin}`, 'Bearer bogus']],
    ['x-statebacked-org-id', ['org_a', 'org_b']],
    ['x-statebacked-act', ['{}', '{}']],
  ] as const) {
    for (const [first, second] of [values, [...values].reverse()]) {
      const lines =
        name === 'authorization'
          ? [`authorization: ${first}`, `authorization: ${second}`]
          : [`authorization: Bearer ${admin}`, `${name}: ${first}`, `${name}: ${second}`];
      const answer = await exchange(
        `POST /machines HTTP/1.1\r\nhost: x\r\n${lines.join('\r\n')}\r\ncontent-length: 17\r\n\r\n{"slug":"dup-hd"}`,
        400,
      );
      t.match(answer, /^HTTP\/1\.1 400 /, `${name} twice (${first} first)`);
      t.match(answer, new RegExp(`"parameter":"${name}"`));
    }
  }
  t.equal((await call(node.url, 'GET', '/machines/dup-hd', { token: admin })).status, 404, 'nothing was created');
});

t.test('a body to a route that needs a credential, or to no route, is refused without being kept', async (t) => {
  // Headers that announce more than the node reads (--max-body-bytes 4096), and no body: the answer
  // comes at once, and it is the credential's (or the route's), not the size's.
  const announced = (line: string, headers: string[], length = 10_000) =>
    exchange(`${line} HTTP/1.1\r\nhost: x\r\n${[...headers, `content-length: ${length}`].join('\r\n')}\r\n\r\n`);
  for (const [what, headers] of [
    ['no credential', []],
    ['a bogus operator key', ['authorization: Bearer shadm_bogus']],
    ['a malformed token', ['authorization: Bearer a.b.c']],
  ] as const) {
    for (const line of ['POST /machines', 'POST /machines/m/i/i1/events', 'PUT /machines/m/i/i1/status', 'POST /keys']) {
      const answer = await announced(line, [...headers]);
      t.match(answer, /^HTTP\/1\.1 403 [^]*"code":"unauthorized"/, `${line}, ${what}: 403 at once`);
    }
  }
  t.match(await announced('POST /nowhere', [`authorization: Bearer ${admin}`]), /^HTTP\/1\.1 404 /, 'no such route: 404 at once');
  t.match(
    await announced('PATCH /machines', [`authorization: Bearer ${admin}`]),
    /^HTTP\/1\.1 405 [^]*allow: GET, POST, HEAD/i,
    'wrong method: 405 at once',
  );
  t.equal(
    await announced('POST /machines', [`authorization: Bearer ${admin}`], 4_000),
    '',
    'with a credential the node waits for the body',
  );
  // (an unauthenticated route is not refused for want of one: the token exchange reads its body)
  t.match(await announced('POST /tokens', [], 4_000), /^$/, 'POST /tokens waits for its body');
  // A body within what the node reads is read and thrown away, and the connection goes on.
  const body = JSON.stringify({ slug: 'refused-1', pad: 'x'.repeat(3_000) });
  const both = await exchange(
    `POST /machines HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}` +
      'GET /health HTTP/1.1\r\nhost: x\r\n\r\n',
  );
  t.match(both, /^HTTP\/1\.1 403 [^]*HTTP\/1\.1 200 /, 'refused, then the next request on the connection answered');
  t.equal((await call(node.url, 'GET', '/machines/refused-1', { token: admin })).status, 404, 'nothing was made');
  const created = await call(node.url, 'POST', '/machines', { token: admin, body: { slug: 'after-refusals' } });
  t.equal(created.status, 201, 'a request with a credential and its body is served as before');
});

t.test('names, ids and cursors longer than any real one are a 4xx, never a 500', async (t) => {
  const long = 'a'.repeat(5_000);
  await call(node.url, 'POST', '/machines', { token: admin, body: { slug: 'long-1' } });
  for (const path of [
    `/machines/${long}`,
    `/machines/${long}/i`,
    `/machines/long-1/i/${long}`,
    `/machines/long-1/i/${long}/events`,
    `/machines/${long}/v`,
  ]) {
    const res = await call(node.url, 'GET', path, { token: admin });
    t.equal(res.status, 404, `GET ${path.slice(0, 40)}…: 404`);
    t.ok(res.text.length < 400, 'and the message does not echo the whole name');
  }
  t.equal((await call(node.url, 'DELETE', `/keys/${long}`, { token: admin })).status, 404, 'a key id of no key form');
  const org = await call(node.url, 'GET', '/machines', { token: admin, headers: { 'x-statebacked-org-id': `org_${long}` } });
  t.equal(org.status, 403);
  t.equal(org.body.code, 'missing-org');
  const kid = Buffer.from(JSON.stringify({ alg: 'HS256', kid: `sbk_${long}` })).toString('base64url');
  const token = `${kid}.${Buffer.from('{"sub":"x"}').toString('base64url')}.AAAA`;
  const byKid = await call(node.url, 'GET', '/machines', { token });
  t.equal(byKid.status, 403, 'a token naming a 5,000-character kid');
  t.equal(byKid.body.code, 'unauthorized');
  const cursor = Buffer.from(JSON.stringify({ a: long })).toString('base64url');
  for (const path of ['/machines', '/machines/long-1/i', '/machines/long-1/v']) {
    const res = await call(node.url, 'GET', `${path}?cursor=${cursor}`, { token: admin });
    t.equal(res.status, 400, `${path} with a long cursor: 400`);
    t.equal(res.body.parameter, 'cursor');
  }
  t.equal((await call(node.url, 'GET', '/health')).status, 200);
});
