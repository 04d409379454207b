import { createHmac } from 'node:crypto';
import { signToken } from '@statebacked/token';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--page-size', '3'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

const keyFor = async (scopes: string[]) => {
  const created = await call(node.url, 'POST', '/keys', { token: admin, body: { name: 'k', scopes } });
  if (created.status !== 200) throw new Error(created.text);
  return signToken({ stateBackedKeyId: created.body.id, stateBackedSecretKey: created.body.key }, { sub: 'u' }, { expires: { in: '1h' } });
};
const writer = await keyFor(['machines.read', 'machines.write', 'machines.admin']);
const readerOnly = await keyFor(['machines.read']);
const confirm = (name: string) => createHmac('sha256', name).update(name).digest('base64url');

t.test('create, read, list with cursors', async (t) => {
  const slugs = ['m-1', 'm_2', 'M3', 'm4', 'a', 'z'.repeat(128)];
  for (const slug of slugs) t.equal((await call(node.url, 'POST', '/machines', { token: writer, body: { slug } })).status, 201, slug);
  const created = await call(node.url, 'POST', '/machines', { token: writer, body: { slug: 'indexed', indexes: ['email', 'score'] } });
  t.equal(created.status, 201);
  t.equal(created.text, '', '201 carries no body');

  const one = await call(node.url, 'GET', '/machines/indexed', { token: readerOnly });
  t.equal(one.status, 200);
  t.match(one.body, { machine: { createdAt: String, indexes: ['email', 'score'] } });
  t.notOk('currentVersion' in one.body.machine, 'no version yet');
  t.same((await call(node.url, 'GET', '/machines/m4', { token: readerOnly })).body.machine.indexes, [], 'indexes default to []');

  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await call(node.url, 'GET', `/machines${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`, { token: readerOnly });
    t.equal(page.status, 200);
    t.ok(page.body.machines.length <= 3);
    for (const m of page.body.machines) t.match(m, { slug: String, createdAt: String });
    seen.push(...page.body.machines.map((m: { slug: string }) => m.slug));
    cursor = page.body.cursor;
    if (cursor !== undefined) t.match(cursor, /^[A-Za-z0-9_-]+$/, 'cursor is URL-safe');
    pages++;
  } while (cursor && pages < 10);
  t.same([...seen].sort(), [...slugs, 'indexed'].sort(), 'every machine exactly once');
  t.equal(pages, 3);
});

t.test('validation and conflicts', async (t) => {
  const cases: Array<[unknown, string]> = [
    [{}, 'slug'],
    [{ slug: '' }, 'slug'],
    [{ slug: 'has space' }, 'slug'],
    [{ slug: 'x'.repeat(129) }, 'slug'],
    [{ slug: 'ünï' }, 'slug'],
    [{ slug: 42 }, 'slug'],
    [{ slug: 'ok', indexes: 'email' }, 'indexes'],
    [{ slug: 'ok', indexes: ['bad name'] }, 'indexes'],
    [{ slug: 'ok', indexes: ['a', 'a'] }, 'indexes'],
    [{ slug: 'ok', indexes: ['email', '__proto__'] }, 'indexes'],
  ];
  for (const [body, parameter] of cases) {
    const res = await call(node.url, 'POST', '/machines', { token: writer, body });
    t.equal(res.status, 400, JSON.stringify(body));
    t.same(res.body, { error: res.body.error, code: 'invalid-parameter', parameter });
  }
  const dup = await call(node.url, 'POST', '/machines', { token: writer, body: { slug: 'm4' } });
  t.equal(dup.status, 409);
  t.equal(dup.body.code, 'invalid-state');
  const missing = await call(node.url, 'GET', '/machines/nope', { token: readerOnly });
  t.equal(missing.status, 404);
  t.equal((await call(node.url, 'POST', '/machines', { token: readerOnly, body: { slug: 'x' } })).body.code, 'missing-scope');
  t.equal((await call(node.url, 'POST', '/machines', { token: writer, rawBody: '[1,2]' })).body.parameter, 'body');
});

t.test('delete needs machines.admin and the HMAC confirmation', async (t) => {
  const body = { dangerDataWillBeDeletedForever: true, hmacSha256OfMachineNameWithMachineNameKey: confirm('m4') };
  t.equal((await call(node.url, 'DELETE', '/machines/m4', { token: readerOnly, body })).body.code, 'missing-scope');
  const noDanger = await call(node.url, 'DELETE', '/machines/m4', {
    token: writer,
    body: { ...body, dangerDataWillBeDeletedForever: false },
  });
  t.equal(noDanger.status, 400);
  t.equal(noDanger.body.parameter, 'dangerDataWillBeDeletedForever');
  const wrongHmac = await call(node.url, 'DELETE', '/machines/m4', {
    token: writer,
    body: { ...body, hmacSha256OfMachineNameWithMachineNameKey: confirm('m3') },
  });
  t.equal(wrongHmac.status, 400);
  t.equal(wrongHmac.body.parameter, 'hmacSha256OfMachineNameWithMachineNameKey');
  const padded = await call(node.url, 'DELETE', '/machines/m4', {
    token: writer,
    body: { ...body, hmacSha256OfMachineNameWithMachineNameKey: `${confirm('m4')}=` },
  });
  t.equal(padded.status, 204, 'padding is tolerated');
  t.equal((await call(node.url, 'GET', '/machines/m4', { token: writer })).status, 404);
  t.equal((await call(node.url, 'DELETE', '/machines/m4', { token: writer, body })).status, 404);
  t.equal((await call(node.url, 'POST', '/machines', { token: writer, body: { slug: 'm4' } })).status, 201, 'the name is free again');
});

t.test("one org never sees another org's machines", async (t) => {
  const other = await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'other' } });
  const headers = { 'x-statebacked-org-id': other.body.id };
  t.same((await call(node.url, 'GET', '/machines', { token: admin, headers })).body, { machines: [] });
  t.equal((await call(node.url, 'GET', '/machines/m4', { token: admin, headers })).status, 404);
  t.equal((await call(node.url, 'POST', '/machines', { token: admin, headers, body: { slug: 'm4' } })).status, 201, 'same slug, other org');
});
