import { signToken } from '@statebacked/token';
import t, { type Test } from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--page-size', '2', '--billing-url', 'https://billing.example.com/portal'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

/** Every org the operator sees, following cursors; each page at most the page size (2). */
const allOrgs = async (t: Test) => {
  const orgs: Array<{ id: string; name: string; allowAnonymousAccess: boolean }> = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await call(node.url, 'GET', `/orgs${cursor ? `?cursor=${cursor}` : ''}`, { token: admin });
    t.equal(page.status, 200);
    t.ok(page.body.orgs.length <= 2, 'page size honoured');
    orgs.push(...page.body.orgs);
    cursor = page.body.cursor;
    if (cursor !== undefined) t.match(cursor, /^[A-Za-z0-9_-]+$/, 'cursor is URL-safe');
    pages++;
  } while (cursor && pages < 20);
  return { orgs, pages };
};

t.test('orgs: the bootstrap org, creation and validation', async (t) => {
  const listed = await call(node.url, 'GET', '/orgs', { token: admin });
  t.equal(listed.status, 200);
  t.equal(listed.body.orgs.length, 1);
  t.match(listed.body.orgs[0], {
    id: /^org_/,
    name: 'default',
    role: 'admin',
    createdAt: String,
    allowAnonymousAccess: true,
    limits: { monthlyEventsLimit: Number, monthlyReadsLimit: Number },
  });

  const created = await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'acme', allowAnonymousAccess: false } });
  t.equal(created.status, 200);
  const again = await call(node.url, 'GET', '/orgs', { token: admin });
  t.same(
    again.body.orgs.map((o: { name: string }) => o.name),
    ['default', 'acme'],
  );
  t.equal(again.body.orgs[1].allowAnonymousAccess, false);
  t.notOk('cursor' in again.body, 'two orgs fit one page: no cursor');

  const badNames = [{ name: 'nul\u0000here' }, { name: 'clear\u001b[2J' }, { name: 'two\nlines' }, { name: 'lone \ud800 surrogate' }];
  for (const [body, parameter] of [
    [{}, 'name'],
    [{ name: '' }, 'name'],
    [{ name: 'x', allowAnonymousAccess: 'yes' }, 'allowAnonymousAccess'],
    ...badNames.map((b) => [b, 'name'] as const),
  ] as const) {
    const bad = await call(node.url, 'POST', '/orgs', { token: admin, body });
    t.equal(bad.status, 400, `${JSON.stringify(body)}: 400`);
    t.equal(bad.body.code, 'invalid-parameter');
    t.equal(bad.body.parameter, parameter);
  }
  // Bytes that are not UTF-8 would be stored as U+FFFD: the body is refused instead.
  const notUtf8 = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
  const refused = await call(node.url, 'POST', '/orgs', {
    token: admin,
    rawBody: notUtf8,
    headers: { 'content-type': 'application/json' },
  });
  t.equal(refused.status, 400, 'a body that is not UTF-8: 400');
  t.match(refused.body, { code: 'invalid-parameter', parameter: 'body', error: /not valid UTF-8/ });
  t.equal((await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'café ☕ 𝄞' } })).status, 200, 'any printable name is fine');
  const listed3 = await allOrgs(t);
  t.same(
    listed3.orgs.map((o) => o.name),
    ['default', 'acme', 'café ☕ 𝄞'],
    'only the valid ones were made, oldest first',
  );
  t.equal(listed3.pages, 2, 'GET /orgs pages like every list (--page-size 2)');
});

t.test('orgs: paging, each org once, bad cursors refused', async (t) => {
  for (const name of ['p1', 'p2', 'p3']) t.equal((await call(node.url, 'POST', '/orgs', { token: admin, body: { name } })).status, 200);
  const { orgs, pages } = await allOrgs(t);
  const names = orgs.map((o) => o.name);
  t.same(names.slice(-3), ['p1', 'p2', 'p3'], 'newest last');
  t.equal(new Set(orgs.map((o) => o.id)).size, orgs.length, 'each org once');
  t.equal(pages, Math.ceil(orgs.length / 2));
  for (const cursor of ['garbage!', Buffer.from(JSON.stringify({ a: 'org_x' })).toString('base64url')]) {
    t.match(await call(node.url, 'GET', `/orgs?cursor=${cursor}`, { token: admin }), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'cursor' },
    });
  }
});

t.test('keys: presets, explicit scopes, listing with cursors, deletion', async (t) => {
  const org = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs[1].id as string;
  const headers = { 'x-statebacked-org-id': org };
  const production = await call(node.url, 'POST', '/keys', { token: admin, headers, body: { name: 'prod', use: 'production' } });
  t.equal(production.status, 200);
  t.match(production.body, { id: /^sbk_[A-Za-z0-9_-]{22}$/, key: /^sbsec_/ });
  const explicit = await call(node.url, 'POST', '/keys', {
    token: admin,
    headers,
    body: { name: 'mixed', use: 'production', scopes: ['org.read', 'tokens.admin', 'org.keys.write', 'org.write'] },
  });
  const ci = await call(node.url, 'POST', '/keys', { token: admin, headers, body: { name: 'ci', use: 'ci' } });
  const controlled = await call(node.url, 'POST', '/keys', { token: admin, headers, body: { name: 'ci\u0000', use: 'ci' } });
  t.match(
    controlled,
    { status: 400, body: { code: 'invalid-parameter', parameter: 'name' } },
    'a key name with a control character: 400, no key',
  );

  const pages: Array<{ id: string; name: string; scopes: string[]; createdAt: string }> = [];
  let cursor: string | undefined;
  do {
    const page = await call(node.url, 'GET', `/keys${cursor ? `?cursor=${cursor}` : ''}`, { token: admin, headers });
    t.equal(page.status, 200);
    t.ok(page.body.keys.length <= 2, 'page size honoured');
    pages.push(...page.body.keys);
    cursor = page.body.cursor;
  } while (cursor);
  t.equal(pages.length, 3);
  t.notOk(JSON.stringify(pages).includes('sbsec_'), 'no secret in a list');
  const byName = Object.fromEntries(pages.map((k) => [k.name, k]));
  t.same(byName.prod?.scopes, ['events.write', 'state.read', 'instances.write', 'indexes.read']);
  t.same(byName.ci?.scopes, ['machines.read', 'machines.write', 'machines.admin', 'machine-versions.read', 'machine-versions.write']);
  t.same(byName.mixed?.scopes, ['org.read', 'tokens.admin', 'org.keys.write', 'org.write'], 'explicit scopes win over use');

  const token = await signToken(
    { stateBackedKeyId: explicit.body.id, stateBackedSecretKey: explicit.body.key },
    { sub: 'u' },
    { expires: { in: '1h' } },
  );
  const asKey = await call(node.url, 'GET', '/orgs', { token });
  t.equal(asKey.status, 200);
  t.same(
    asKey.body.orgs.map((o: { id: string }) => o.id),
    [org],
    'a key sees only its own org',
  );
  const keysAsKey = await call(node.url, 'GET', '/keys', { token });
  t.equal(keysAsKey.status, 200);
  t.equal((await call(node.url, 'POST', '/orgs', { token, body: { name: 'x' } })).body.code, 'missing-user');
  t.equal((await call(node.url, 'GET', '/billing', { token })).body.url, 'https://billing.example.com/portal');

  const ciToken = await signToken(
    { stateBackedKeyId: ci.body.id, stateBackedSecretKey: ci.body.key },
    { sub: 'u' },
    { expires: { in: '1h' } },
  );
  for (const [method, path] of [
    ['GET', '/keys'],
    ['POST', '/keys'],
    ['GET', '/billing'],
    ['GET', '/orgs'],
    ['DELETE', `/keys/${ci.body.id}`],
  ] as const) {
    const denied = await call(node.url, method, path, { token: ciToken, body: method === 'POST' ? { name: 'x', use: 'ci' } : undefined });
    t.equal(denied.status, 403, `${method} ${path} needs a scope the ci key lacks`);
    t.equal(denied.body.code, 'missing-scope');
  }

  t.equal((await call(node.url, 'DELETE', `/keys/${ci.body.id}`, { token })).status, 204);
  t.equal((await call(node.url, 'GET', '/machines', { token: ciToken })).status, 403, 'tokens of a deleted key stop at once');
  const missing = await call(node.url, 'DELETE', `/keys/${ci.body.id}`, { token });
  t.equal(missing.status, 404);

  for (const [body, parameter] of [
    [{ name: 'x' }, 'scopes'],
    [{ name: 'x', use: 'admin' }, 'use'],
    [{ name: 'x', scopes: ['root'] }, 'scopes'],
    [{ use: 'ci' }, 'name'],
    [{ name: 'x', scopes: 'state.read' }, 'scopes'],
  ] as const) {
    const bad = await call(node.url, 'POST', '/keys', { token: admin, headers, body });
    t.equal(bad.status, 400, JSON.stringify(body));
    t.equal(bad.body.parameter, parameter);
  }
  const badCursor = await call(node.url, 'GET', '/keys?cursor=%%%', { token: admin, headers });
  t.equal(badCursor.status, 400);
  t.equal(badCursor.body.parameter, 'cursor');
});

t.test('billing: the configured portal link', async (t) => {
  const org = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs[0].id as string;
  const res = await call(node.url, 'GET', '/billing', { token: admin, headers: { 'x-statebacked-org-id': org } });
  t.equal(res.status, 200);
  t.same(res.body, { url: 'https://billing.example.com/portal' });
});
