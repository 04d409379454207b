import { signToken } from '@statebacked/token';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { craftJwt, inOneHour, STATEBACKED_AUD } from './helpers/tokens.js';

const node = await startNode();
t.teardown(() => node.stop());
const admin = node.adminKey as string;

const bootstrapOrg = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs[0].id as string;

const createKey = async (scopes: string[]) => {
  const created = await call(node.url, 'POST', '/keys', {
    token: admin,
    body: { name: `k-${scopes.join('-')}`, scopes },
    headers: { 'x-statebacked-org-id': bootstrapOrg },
  });
  if (created.status !== 200) throw new Error(`key creation failed: ${created.text}`);
  return created.body as { id: string; key: string };
};

const reader = await createKey(['machines.read']);
const deleted = await createKey(['machines.read']);
const good = await signToken({ stateBackedKeyId: reader.id, stateBackedSecretKey: reader.key }, { sub: 'u1' }, { expires: { in: '1h' } });

t.test('a token from @statebacked/token is accepted', async (t) => {
  const res = await call(node.url, 'GET', '/machines', { token: good });
  t.equal(res.status, 200);
  t.same(res.body, { machines: [] });
});

t.test('tokens with our own public URL as audience are accepted', async (t) => {
  const token = craftJwt({ alg: 'HS256', kid: reader.id }, { aud: `${node.url}/`, exp: inOneHour(), act: { sub: 'u' } }, reader.key);
  t.equal((await call(node.url, 'GET', '/machines', { token })).status, 200);
});

t.test('a key token without exp is accepted (the interface spec makes expiry optional), and used again', async (t) => {
  const token = craftJwt({ alg: 'HS256', kid: reader.id }, { aud: STATEBACKED_AUD, act: { sub: 'u1' } }, reader.key);
  const first = await call(node.url, 'GET', '/machines', { token });
  t.equal(first.status, 200, first.text);
  t.same(first.body, { machines: [] });
  t.equal((await call(node.url, 'GET', '/machines', { token })).status, 200, 'a second time (from the verified-token cache)');
});

t.test('bad credentials are refused with 403 and a clear error', async (t) => {
  const deletedToken = await signToken(
    { stateBackedKeyId: deleted.id, stateBackedSecretKey: deleted.key },
    { sub: 'u1' },
    { expires: { in: '1h' } },
  );
  t.equal((await call(node.url, 'GET', '/machines', { token: deletedToken })).status, 200, 'works before the key is deleted');
  const deletedNoExp = craftJwt({ alg: 'HS256', kid: deleted.id }, { aud: STATEBACKED_AUD, act: { sub: 'u1' } }, deleted.key);
  t.equal((await call(node.url, 'GET', '/machines', { token: deletedNoExp })).status, 200, 'one without exp too');
  t.equal((await call(node.url, 'DELETE', `/keys/${deleted.id}`, { token: admin })).status, 204);

  const base = { aud: STATEBACKED_AUD, exp: inOneHour(), act: { sub: 'u1' } };
  const noExp = { aud: STATEBACKED_AUD, act: { sub: 'u1' } };
  const cases: Array<{ name: string; headers?: Record<string, string>; token?: string; code: string; message: RegExp }> = [
    { name: 'no header', code: 'unauthorized', message: /missing Authorization/ },
    { name: 'not a bearer', headers: { authorization: 'Basic abc' }, code: 'unauthorized', message: /Bearer/ },
    { name: 'garbage', token: 'garbage.garbage.garbage', code: 'unauthorized', message: /not a JWT/ },
    { name: 'wrong operator key', token: 'shadm_not-the-key', code: 'unauthorized', message: /invalid credentials/ },
    { name: 'alg none', token: craftJwt({ alg: 'none', kid: reader.id }, base, undefined), code: 'unauthorized', message: /HS256/ },
    { name: 'HS512', token: craftJwt({ alg: 'HS512', kid: reader.id }, base, reader.key), code: 'unauthorized', message: /HS256/ },
    {
      name: 'unknown kid',
      token: craftJwt({ alg: 'HS256', kid: 'sbk_AAAAAAAAAAAAAAAAAAAAAA' }, base, reader.key),
      code: 'unauthorized',
      message: /unknown or deleted key/,
    },
    { name: 'no kid', token: craftJwt({ alg: 'HS256' }, base, reader.key), code: 'unauthorized', message: /kid/ },
    {
      name: 'wrong secret',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, base, 'sbsec_wrong'),
      code: 'unauthorized',
      message: /signature/,
    },
    {
      name: 'tampered payload',
      token: (() => {
        const [h, , s] = good.split('.');
        return `${h}.${Buffer.from(JSON.stringify({ ...base, act: { sub: 'admin' } })).toString('base64url')}.${s}`;
      })(),
      code: 'unauthorized',
      message: /signature/,
    },
    {
      name: 'expired',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { ...base, exp: Math.floor(Date.now() / 1000) - 5 }, reader.key),
      code: 'unauthorized',
      message: /expired/,
    },
    {
      name: 'not yet valid',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { ...base, nbf: inOneHour() }, reader.key),
      code: 'unauthorized',
      message: /not valid yet/,
    },
    {
      name: 'wrong aud',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { ...base, aud: 'https://example.com/' }, reader.key),
      code: 'unauthorized',
      message: /aud/,
    },
    {
      name: 'missing aud',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { exp: inOneHour() }, reader.key),
      code: 'unauthorized',
      message: /aud/,
    },
    {
      name: 'no exp, wrong secret',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, noExp, 'sbsec_wrong'),
      code: 'unauthorized',
      message: /signature/,
    },
    { name: 'no exp, HS512', token: craftJwt({ alg: 'HS512', kid: reader.id }, noExp, reader.key), code: 'unauthorized', message: /HS256/ },
    { name: 'no exp, no kid', token: craftJwt({ alg: 'HS256' }, noExp, reader.key), code: 'unauthorized', message: /kid/ },
    {
      name: 'no exp, wrong aud',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { ...noExp, aud: 'https://example.com/' }, reader.key),
      code: 'unauthorized',
      message: /aud/,
    },
    {
      name: 'no exp, not yet valid',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { ...noExp, nbf: inOneHour() }, reader.key),
      code: 'unauthorized',
      message: /not valid yet/,
    },
    {
      name: 'exp as text',
      token: craftJwt({ alg: 'HS256', kid: reader.id }, { ...base, exp: String(inOneHour()) }, reader.key),
      code: 'unauthorized',
      message: /exp claim is not a number/,
    },
    { name: 'deleted key', token: deletedToken, code: 'unauthorized', message: /unknown or deleted key/ },
    { name: 'deleted key, no exp', token: deletedNoExp, code: 'unauthorized', message: /unknown or deleted key/ },
    {
      name: 'claims nested 150 deep',
      token: craftJwt(
        { alg: 'HS256', kid: reader.id },
        { ...base, act: JSON.parse(`${'{"a":'.repeat(150)}1${'}'.repeat(150)}`) },
        reader.key,
      ),
      code: 'unauthorized',
      message: /nest objects and arrays more than \d+ levels deep/,
    },
    { name: 'missing scope', token: good, code: 'missing-scope', message: /machines.write/ },
  ];
  for (const c of cases) {
    const res =
      c.name === 'missing scope'
        ? await call(node.url, 'POST', '/machines', { token: c.token, body: { slug: 'nope' } })
        : await call(node.url, 'GET', '/machines', { token: c.token, headers: c.headers });
    t.equal(res.status, 403, `${c.name}: 403`);
    t.equal(res.body?.code, c.code, `${c.name}: code ${c.code}`);
    t.match(res.body?.error, c.message, `${c.name}: says why`);
  }
});

t.test('an operator call with several orgs must name one', async (t) => {
  const created = await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'second' } });
  t.equal(created.status, 200);
  t.match(created.body.id, /^org_[A-Za-z0-9_-]{22}$/);
  const ambiguous = await call(node.url, 'GET', '/machines', { token: admin });
  t.equal(ambiguous.status, 400);
  t.equal(ambiguous.body.code, 'specify-org');
  const named = await call(node.url, 'GET', '/machines', { token: admin, headers: { 'x-statebacked-org-id': created.body.id } });
  t.equal(named.status, 200);
  const unknown = await call(node.url, 'GET', '/machines', {
    token: admin,
    headers: { 'x-statebacked-org-id': 'org_AAAAAAAAAAAAAAAAAAAAAA' },
  });
  t.equal(unknown.status, 403);
  t.equal(unknown.body.code, 'missing-org');
  const keyInOtherOrg = await call(node.url, 'GET', '/machines', { token: good, headers: { 'x-statebacked-org-id': created.body.id } });
  t.equal(keyInOtherOrg.status, 403, 'a key token cannot reach another org through the org header');
  t.equal(keyInOtherOrg.body.code, 'missing-org');
  const keyOwnOrg = await call(node.url, 'GET', '/machines', { token: good });
  t.equal(keyOwnOrg.status, 200, 'a key token needs no org header');
});

t.test('a key with org.keys.write makes keys with at most its own scopes', async (t) => {
  const keyWriter = await createKey(['org.keys.write', 'machines.read', 'state.read']);
  const token = await signToken(
    { stateBackedKeyId: keyWriter.id, stateBackedSecretKey: keyWriter.key },
    { sub: 'k' },
    { expires: { in: '1h' } },
  );
  const make = (body: Record<string, unknown>) => call(node.url, 'POST', '/keys', { token, body: { name: 'made', ...body } });
  const stronger = await make({ scopes: ['machines.read', 'machine-versions.write', 'tokens.admin'] });
  t.equal(stronger.status, 403);
  t.match(stronger.body, {
    code: 'missing-scope',
    error: /give a new key only within the scopes it has itself; this one lacks machine-versions\.write, tokens\.admin/,
  });
  t.equal((await make({ use: 'production' })).status, 403, 'a preset it does not hold whole');
  const weaker = await make({ scopes: ['machines.read', 'org.keys.write'] });
  t.equal(weaker.status, 200, 'its own scopes, or fewer');
  const admins = await call(node.url, 'POST', '/keys', {
    token: admin,
    body: { name: 'all', scopes: ['machine-versions.write', 'tokens.admin'] },
    headers: { 'x-statebacked-org-id': bootstrapOrg },
  });
  t.equal(admins.status, 200, 'an operator gives any scope');

  // Revoking gives nothing: it may delete a stronger key (a leaked one must be revocable).
  const second = await call(node.url, 'POST', '/keys', {
    token: admin,
    body: { name: 'stronger', scopes: ['machines.admin'] },
    headers: { 'x-statebacked-org-id': bootstrapOrg },
  });
  t.equal((await call(node.url, 'DELETE', `/keys/${second.body.id}`, { token })).status, 204, 'it deletes a key with scopes it lacks');

  // Nor can a key borrow a stronger one's scopes through a token provider.

  const tokensAdmin = await createKey(['tokens.admin', 'state.read']);
  const adminToken = await signToken(
    { stateBackedKeyId: tokensAdmin.id, stateBackedSecretKey: tokensAdmin.key },
    { sub: 'k' },
    { expires: { in: '1h' } },
  );
  const provider = (keyId: string) =>
    call(node.url, 'POST', '/token-providers', { token: adminToken, body: { service: 'borrow', keyId, mapping: { 'sub.$': '$.sub' } } });
  const borrowed = await provider(admins.body.id);
  t.equal(
    borrowed.status,
    403,
    "a tokens.admin key cannot point a token provider at a stronger key (its tokens would carry that key's scopes)",
  );
  t.match(borrowed.body, {
    code: 'missing-scope',
    error: /point a token provider at a key only within the scopes it has itself; this one lacks machine-versions\.write$/,
  });
  const reader = await createKey(['state.read']);
  t.equal((await provider(reader.id)).status, 204, 'one with a subset of its scopes, it can');
});

t.test('impersonation needs org.keys.write and a JSON object', async (t) => {
  const denied = await call(node.url, 'GET', '/machines', { token: good, headers: { 'x-statebacked-act': '{"sub":"x"}' } });
  t.equal(denied.status, 403);
  t.equal(denied.body.code, 'missing-scope');
  const keyWriter = await createKey(['org.keys.write', 'machines.read']);
  const writerToken = await signToken(
    { stateBackedKeyId: keyWriter.id, stateBackedSecretKey: keyWriter.key },
    { sub: 'boss' },
    { expires: { in: '1h' } },
  );
  t.equal((await call(node.url, 'GET', '/machines', { token: writerToken, headers: { 'x-statebacked-act': '{"sub":"x"}' } })).status, 200);
  const bad = await call(node.url, 'GET', '/machines', { token: writerToken, headers: { 'x-statebacked-act': 'not json' } });
  t.equal(bad.status, 400);
  t.equal(bad.body.parameter, 'x-statebacked-act');
});
