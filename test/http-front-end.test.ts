import { connect } from 'node:net';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--max-body-bytes', '4096'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

t.test('CORS: preflight and response headers', async (t) => {
  const preflight = await call(node.url, 'OPTIONS', '/machines', {
    headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-statebacked-org-id, x-statebacked-act' },
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
  const textType = await call(node.url, 'POST', '/machines', { token: admin, rawBody: '{"slug":"text-type"}', headers: { 'content-type': 'text/plain' } });
  t.equal(textType.status, 201);
  const empty = await call(node.url, 'POST', '/orgs', { token: admin, headers: { 'content-type': 'application/json' } });
  t.equal(empty.status, 400, 'an empty JSON body is accepted as {} and then validated');
  t.equal(empty.body.parameter, 'name');
  const emptyGet = await call(node.url, 'GET', '/machines', { token: admin, headers: { 'content-type': 'application/json' } });
  t.equal(emptyGet.status, 200);
  const malformed = await call(node.url, 'POST', '/machines', { token: admin, rawBody: '{"slug":', headers: { 'content-type': 'application/json' } });
  t.equal(malformed.status, 400);
  t.same(malformed.body, { error: malformed.body.error, code: 'invalid-parameter', parameter: 'body' });
  t.match(malformed.body.error, /not valid JSON/);
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
  t.equal((await call(node.url, 'GET', '/machines/%E0%A4%A', { token: admin })).status, 404, 'a bad escape is not found, not a crash');
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
