/**
 * Token exchange, identity providers, token providers and anonymous access (wire-protocol §3.7–3.9,
 * §4), end to end with the real client. A local JWKS server (RS256 and ES256 keys made by jose here)
 * stands in for a remote identity provider; the nodes reach it because --fetch-allow opens its port.
 * On a cluster each request goes to the next node, so what one node configures another exchanges.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errors, StateBackedClient } from '@statebacked/client';
import { exportJWK, generateKeyPair, type JWK, type KeyLike, SignJWT } from 'jose';
import t from 'tap';
import { call } from './helpers/http.js';
import { onlyEmbedded, removeDir, startNode, tempDataDir } from './helpers/node-process.js';

// --- the identity provider: a JWKS document on loopback, its keys made here ---------------------------
const rsa = await generateKeyPair('RS256');
const ec = await generateKeyPair('ES256');
const stranger = await generateKeyPair('RS256');
const jwks: { keys: JWK[] } = {
  keys: [
    { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
    { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
  ],
};
let jwksRequests = 0;
const jwksServer = createServer((req, res) => {
  jwksRequests++;
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(jwks));
});
await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
const jwksPort = (jwksServer.address() as AddressInfo).port;
const jwksUrl = `http://127.0.0.1:${jwksPort}/.well-known/jwks.json`;
t.teardown(() => jwksServer.close());

const ISS = 'https://idp.example.test/';
const AUD = 'statehold-app';
const now = () => Math.floor(Date.now() / 1000);

const idpToken = (
  claims: Record<string, unknown>,
  options: { key?: KeyLike | Uint8Array; alg?: string; kid?: string; iss?: string; aud?: string; exp?: number } = {},
): Promise<string> =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: options.alg ?? 'RS256', ...(options.kid === '' ? {} : { kid: options.kid ?? 'rsa-1' }) })
    .setIssuer(options.iss ?? ISS)
    .setAudience(options.aud ?? AUD)
    .setIssuedAt()
    .setExpirationTime(options.exp ?? now() + 600)
    .sign(options.key ?? rsa.privateKey);

// --- the service ---------------------------------------------------------------------------------------
// (every request here comes from one loopback address: the per-address limit is the rate-limit test's)
// (the last test restarts this node on its data dir: a node of its own would cost a start, a whole
// cluster's in the drop-in pass on a cluster)
const nodeDir = tempDataDir();
const nodeArgs = ['--fetch-allow', `127.0.0.1:${jwksPort}`, '--token-exchanges-per-address', '1000'];
let node = await startNode({ dataDir: nodeDir, args: nodeArgs });
t.teardown(async () => {
  await node.stop();
  removeDir(nodeDir);
});
const operator = new StateBackedClient(node.adminKey as string, { apiHost: node.url });
const orgId = (await operator.orgs.list()).orgs[0]?.id as string;
const admin = node.adminKey as string;

/** Instances named after the caller: anonymous sessions own theirs, app users theirs. */
const machineCode = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'notes', predictableActionArguments: true, initial: 'open', context: { count: 0 }, states: {
  open: { on: { ADD: { actions: assign({ count: (c) => c.count + 1 }) } } },
} });
const owner = ({ machineInstanceName, authContext }) =>
  (authContext.auth === 'anonymous' && Object.keys(authContext).sort().join(',') === 'auth,did,sid' && authContext.sid === machineInstanceName) ||
  (authContext.via === 'app' && authContext.sub === machineInstanceName);
export const allowRead = owner;
export const allowWrite = owner;
`;
await operator.machines.create('notes');
await operator.machineVersions.create('notes', { clientInfo: 'v1', makeCurrent: true, code: machineCode });

const exchange = (form: Record<string, string>, target = node.url) =>
  fetch(`${target}/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  }).then(async (res) => ({ status: res.status, body: (await res.json()) as Record<string, unknown> }));
const exchangeForm = (subjectToken: string, service = 'app', org = orgId) => ({
  grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
  audience: `https://tokens.statebacked.dev/${org}/${service}`,
  requested_token_type: 'urn:ietf:params:oauth:token-type:access_token',
  subject_token: subjectToken,
});
const payloadOf = (token: string): Record<string, unknown> => JSON.parse(atob(token.split('.')[1] as string));

t.test('anonymous access: the real client drives an instance its session owns', async (t) => {
  const anonymous = (sid: string) =>
    new StateBackedClient({ anonymous: { orgId, getSessionId: () => sid, getDeviceId: () => `device-of-${sid}` } }, { apiHost: node.url });
  const alice = anonymous('session-a');
  t.match(await alice.machineInstances.create('notes', { slug: 'session-a' }), { state: 'open' });
  t.match(await alice.machineInstances.sendEvent('notes', 'session-a', { event: 'ADD' }), { state: 'open' });
  t.match(await alice.machineInstances.get('notes', 'session-a'), { state: 'open' });
  await t.rejects(
    alice.machineInstances.create('notes', { slug: 'session-b' }),
    errors.RejectedByMachineAuthorizerError,
    'not its own instance',
  );
  await t.rejects(
    anonymous('session-b').machineInstances.sendEvent('notes', 'session-a', { event: 'ADD' }),
    errors.RejectedByMachineAuthorizerError,
    'another session is refused',
  );

  // The three records are ordinary ones: listed, the key without its secret.
  const headers = { 'x-statebacked-org-id': orgId };
  const idps = await call(node.url, 'GET', '/idps', { token: admin, headers });
  t.match(idps.body.idps, [
    { aud: `https://${orgId}.anonymous.auth.statebacked.dev`, iss: `https://${orgId}.anonymous.auth.statebacked.dev`, algs: ['HS256'] },
  ]);
  t.notOk('key' in idps.body.idps[0], 'no key material in the listing');
  const providers = await call(node.url, 'GET', '/token-providers', { token: admin, headers });
  t.match(providers.body.tokenProviders, [{ service: 'anonymous-statebacked-dev', keyId: /^sbk_/, mapping: { auth: 'anonymous' } }]);
  const keys = await call(node.url, 'GET', '/keys', { token: admin, headers });
  t.match(
    keys.body.keys.find((k: { id: string }) => k.id === providers.body.tokenProviders[0].keyId),
    { scopes: ['events.write', 'state.read', 'instances.write', 'indexes.read'] },
  );
});

t.test('anonymous access can be switched off and on again', async (t) => {
  const headers = { 'x-statebacked-org-id': orgId };
  const off = await call(node.url, 'PATCH', `/orgs/${orgId}`, { token: admin, headers, body: { allowAnonymousAccess: false } });
  t.equal(off.status, 200);
  t.equal(off.body.allowAnonymousAccess, false);
  const client = new StateBackedClient({ anonymous: { orgId, getSessionId: () => 'session-c' } }, { apiHost: node.url });
  await t.rejects(
    client.machineInstances.create('notes', { slug: 'session-c' }),
    errors.UnauthorizedError,
    'no exchange without anonymous access',
  );
  t.same((await call(node.url, 'GET', '/idps', { token: admin, headers })).body.idps, [], 'its identity provider is gone');
  t.same(
    (await call(node.url, 'GET', '/token-providers', { token: admin, headers })).body.tokenProviders,
    [],
    'its token provider is gone',
  );

  const on = await call(node.url, 'PATCH', `/orgs/${orgId}`, { token: admin, headers, body: { allowAnonymousAccess: true } });
  t.equal(on.body.allowAnonymousAccess, true);
  const again = new StateBackedClient({ anonymous: { orgId, getSessionId: () => 'session-d' } }, { apiHost: node.url });
  t.match(await again.machineInstances.create('notes', { slug: 'session-d' }), { state: 'open' });
  // Deleting its key (it is listed with the others) turns anonymous access off, as the org then says.
  const itsKey = (await call(node.url, 'GET', '/keys', { token: admin, headers })).body.keys.find(
    (key: { name: string }) => key.name === 'anonymous access',
  );
  t.equal((await call(node.url, 'DELETE', `/keys/${itsKey.id}`, { token: admin, headers })).status, 204);
  const orgNow = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs.find((org: { id: string }) => org.id === orgId);
  t.equal(orgNow.allowAnonymousAccess, false, 'the org says it has no anonymous access once its key is deleted');
  t.same((await call(node.url, 'GET', '/token-providers', { token: admin, headers })).body.tokenProviders, [], 'nor its token provider');
  await t.rejects(
    new StateBackedClient({ anonymous: { orgId, getSessionId: () => 'session-e' } }, { apiHost: node.url }).machineInstances.create(
      'notes',
      {
        slug: 'session-e',
      },
    ),
    errors.UnauthorizedError,
  );
  await call(node.url, 'PATCH', `/orgs/${orgId}`, { token: admin, headers, body: { allowAnonymousAccess: true } });
  const back = new StateBackedClient({ anonymous: { orgId, getSessionId: () => 'session-f' } }, { apiHost: node.url });
  t.match(await back.machineInstances.create('notes', { slug: 'session-f' }), { state: 'open' }, 'and PATCH turns it on again');

  const bad = await call(node.url, 'PATCH', `/orgs/${orgId}`, { token: admin, headers, body: { allowAnonymousAccess: 'no' } });
  t.equal(bad.status, 400);
  t.equal(bad.body.parameter, 'allowAnonymousAccess');

  const closed = await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'closed', allowAnonymousAccess: false } });
  const refused = await exchange(exchangeForm('x.y.z', 'anonymous-statebacked-dev', closed.body.id));
  t.equal(refused.status, 400, 'not a JWT');
  const anonymousJwt = await new SignJWT({ sid: 's', did: 's' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(`https://${closed.body.id}.anonymous.auth.statebacked.dev`)
    .setAudience(`https://${closed.body.id}.anonymous.auth.statebacked.dev`)
    .setIssuedAt()
    .setExpirationTime(now() + 600)
    .sign(new TextEncoder().encode(closed.body.id));
  const noAnonymous = await exchange(exchangeForm(anonymousJwt, 'anonymous-statebacked-dev', closed.body.id));
  t.equal(noAnonymous.status, 403);
  t.equal(noAnonymous.body.error, 'invalid_grant');
  const opened = await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'opened' } });
  const signedFor = (org: string) =>
    new SignJWT({ sid: 's', did: 's', extra: 'dropped' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(`https://${org}.anonymous.auth.statebacked.dev`)
      .setAudience(`https://${org}.anonymous.auth.statebacked.dev`)
      .setIssuedAt()
      .setExpirationTime(now() + 600)
      .sign(new TextEncoder().encode(org));
  const withAnonymous = await exchange(exchangeForm(await signedFor(opened.body.id), 'anonymous-statebacked-dev', opened.body.id));
  t.equal(withAnonymous.status, 200, 'a new org allows anonymous access by default');
  t.same(payloadOf(withAnonymous.body.access_token as string).act, { sid: 's', did: 's', auth: 'anonymous' }, 'only sid, did and auth');
  const crossOrg = await exchange(exchangeForm(await signedFor(closed.body.id), 'anonymous-statebacked-dev', opened.body.id));
  t.equal(crossOrg.status, 403, 'a token signed for another org is not accepted');

  // Anyone may make an anonymous token (the org id is its key): it buys the anonymous service's tokens only.
  const openedHeaders = { 'x-statebacked-org-id': opened.body.id };
  const powerful = (
    await call(node.url, 'POST', '/keys', {
      token: admin,
      headers: openedHeaders,
      body: { name: 'backend', scopes: ['org.keys.write', 'machines.read'] },
    })
  ).body;
  await call(node.url, 'POST', '/token-providers', {
    token: admin,
    headers: openedHeaders,
    body: { service: 'backend', keyId: powerful.id, mapping: { tier: 'employee' } },
  });
  const escalation = await exchange(exchangeForm(await signedFor(opened.body.id), 'backend', opened.body.id));
  t.equal(escalation.status, 403, 'an anonymous token is not exchanged for another service');
  const objectSid = await new SignJWT({ sid: { __proto__: { admin: true } }, did: 'd' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(`https://${opened.body.id}.anonymous.auth.statebacked.dev`)
    .setAudience(`https://${opened.body.id}.anonymous.auth.statebacked.dev`)
    .setIssuedAt()
    .setExpirationTime(now() + 600)
    .sign(new TextEncoder().encode(opened.body.id));
  t.equal(
    (await exchange(exchangeForm(objectSid, 'anonymous-statebacked-dev', opened.body.id))).status,
    403,
    'an anonymous sid must be a string',
  );

  // Its key deleted by hand, anonymous access is repaired by switching it on.
  const anonymousKey = (await call(node.url, 'GET', '/token-providers', { token: admin, headers: openedHeaders })).body.tokenProviders.find(
    (p: { service: string }) => p.service === 'anonymous-statebacked-dev',
  ).keyId;
  t.equal((await call(node.url, 'DELETE', `/keys/${anonymousKey}`, { token: admin, headers: openedHeaders })).status, 204);
  t.equal(
    (await exchange(exchangeForm(await signedFor(opened.body.id), 'anonymous-statebacked-dev', opened.body.id))).status,
    403,
    'no key, no token',
  );
  await call(node.url, 'PATCH', `/orgs/${opened.body.id}`, { token: admin, headers: openedHeaders, body: { allowAnonymousAccess: true } });
  t.equal(
    (await exchange(exchangeForm(await signedFor(opened.body.id), 'anonymous-statebacked-dev', opened.body.id))).status,
    200,
    'repaired',
  );
});

t.test('a JWKS identity provider and a token provider: the real client reads and writes', async (t) => {
  const headers = { 'x-statebacked-org-id': orgId };
  const key = (await call(node.url, 'POST', '/keys', { token: admin, headers, body: { name: 'app tokens', use: 'production' } })).body;
  const provider = await call(node.url, 'POST', '/token-providers', {
    token: admin,
    headers,
    body: { service: 'app', keyId: key.id, mapping: { 'sub.$': '$.sub', 'roles.$': '$.roles', via: 'app' } },
  });
  t.equal(provider.status, 204);
  const idp = await call(node.url, 'POST', '/idps', {
    token: admin,
    headers,
    body: { iss: ISS, aud: AUD, jwksUrl, algs: ['RS256', 'ES256'], mapping: { 'sub.$': '$.sub', 'roles.$': '$.groups[*]' } },
  });
  t.equal(idp.status, 204);

  for (const [name, sign] of [
    ['RS256', () => idpToken({ sub: 'user-rs', groups: ['a', 'b'] })],
    ['ES256', () => idpToken({ sub: 'user-es', groups: ['c'] }, { key: ec.privateKey, alg: 'ES256', kid: 'ec-1' })],
  ] as const) {
    const user = name === 'RS256' ? 'user-rs' : 'user-es';
    const client = new StateBackedClient({ identityProviderToken: sign, orgId, tokenProviderService: 'app' }, { apiHost: node.url });
    t.match(await client.machineInstances.create('notes', { slug: user }), { state: 'open' }, `${name}: create`);
    t.match(await client.machineInstances.sendEvent('notes', user, { event: 'ADD' }), { state: 'open' }, `${name}: send`);
    t.match(await client.machineInstances.get('notes', user), { state: 'open' }, `${name}: read`);
    await t.rejects(
      client.machineInstances.get('notes', 'someone-else'),
      errors.NotFoundError,
      `${name}: a missing instance is still a 404`,
    );
  }

  const minted = await exchange(exchangeForm(await idpToken({ sub: 'user-rs', groups: ['a', 'b'], email: 'u@example.test' })));
  t.equal(minted.status, 200);
  t.match(minted.body, { access_token: String, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'Bearer' });
  const payload = payloadOf(minted.body.access_token as string);
  t.same(payload.act, { sub: 'user-rs', roles: ['a', 'b'], via: 'app' }, 'act is the IdP mapping, then the token provider mapping');
  t.equal(payload.aud, 'https://api.statebacked.dev/');
  t.ok((payload.exp as number) <= now() + 600 + 1, 'the token lives no longer than its subject token');
  t.notMatch((minted.body.access_token as string).split('.')[1], /[-_]/, 'the payload is readable with atob, so the client learns exp');
});

t.test('refused subject tokens', async (t) => {
  const expectRefused = async (name: string, token: Promise<string> | string, message = /not accepted/) => {
    const res = await exchange(exchangeForm(await token));
    t.equal(res.status, 403, `${name}: 403`);
    t.equal(res.body.error, 'invalid_grant', `${name}: invalid_grant`);
    t.match(res.body.error_description, message, name);
  };
  await expectRefused('signed by another key', idpToken({ sub: 'u' }, { key: stranger.privateKey }));
  await expectRefused('wrong aud', idpToken({ sub: 'u' }, { aud: 'someone-else' }));
  await expectRefused('wrong iss', idpToken({ sub: 'u' }, { iss: 'https://evil.example.test/' }));
  await expectRefused('an algorithm not allowed', idpToken({ sub: 'u' }, { alg: 'RS384' }));
  await expectRefused('expired', idpToken({ sub: 'u' }, { exp: now() - 60 }), /expired/);
  const unknownService = await exchange(exchangeForm(await idpToken({ sub: 'u' }), 'nope'));
  t.equal(unknownService.status, 403, 'a service without a token provider');
  const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${Buffer.from(JSON.stringify({ iss: ISS, aud: AUD, sub: 'u', exp: now() + 60 })).toString('base64url')}.`;
  await expectRefused('alg none', unsigned);

  const before = jwksRequests;
  await expectRefused('an unknown kid', idpToken({ sub: 'u' }, { kid: 'rsa-404' }));
  await expectRefused('the same unknown kid at once again', idpToken({ sub: 'u' }, { kid: 'rsa-404' }));
  t.ok(jwksRequests - before <= 1, `an unknown kid refetches the JWKS at most once (${jwksRequests - before})`);

  for (const [form, status, error] of [
    [{ ...exchangeForm('a.b.c'), grant_type: 'password' }, 400, 'unsupported_grant_type'],
    [{ ...exchangeForm('a.b.c'), audience: 'https://example.com/x/y' }, 400, 'invalid_request'],
    [{ ...exchangeForm('a.b.c'), requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' }, 400, 'invalid_request'],
    [
      { grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', audience: `https://tokens.statebacked.dev/${orgId}/app` },
      400,
      'invalid_request',
    ],
  ] as const) {
    const res = await exchange(form as Record<string, string>);
    t.equal(res.status, status, JSON.stringify(form).slice(0, 80));
    t.equal(res.body.error, error);
  }
  // (refused before it is decoded: the node's body limit is for uploads and machine code)
  const padded = await exchange({ ...exchangeForm('a.b.c'), padding: 'x'.repeat(100_000) });
  t.equal(padded.status, 413, 'a body far longer than any subject token: not read past 64 KiB');
  t.match(padded.body, { code: 'payload-too-large', error: /at most 65536 bytes/ });
});

t.test('an HS256 identity provider with a shared secret; upserts and deletions', async (t) => {
  const headers = { 'x-statebacked-org-id': orgId };
  const secret = 'a shared secret of the identity provider';
  const body = {
    aud: 'authenticated',
    iss: 'https://project.supabase.test/auth/v1',
    key: Buffer.from(secret).toString('base64url'),
    algs: ['HS256'],
    mapping: { 'sub.$': 'sub' },
  };
  t.equal((await call(node.url, 'POST', '/idps', { token: admin, headers, body })).status, 204);
  const hsToken = () =>
    idpToken({ sub: 'user-hs' }, { key: new TextEncoder().encode(secret), alg: 'HS256', kid: '', iss: body.iss, aud: body.aud });
  const ok = await exchange(exchangeForm(await hsToken()));
  t.equal(ok.status, 200, 'HS256 with the shared secret');
  t.same(payloadOf(ok.body.access_token as string).act, { sub: 'user-hs', via: 'app' }, 'a mapping path without $ is taken from the root');
  const wrongSecret = await exchange(
    exchangeForm(
      await idpToken({ sub: 'x' }, { key: new TextEncoder().encode('not it'), alg: 'HS256', kid: '', iss: body.iss, aud: body.aud }),
    ),
  );
  t.equal(wrongSecret.status, 403);

  // An upsert with the same aud and iss replaces the provider: now its mapping adds a constant.
  t.equal(
    (await call(node.url, 'POST', '/idps', { token: admin, headers, body: { ...body, mapping: { 'sub.$': '$.sub', tier: 'gold' } } }))
      .status,
    204,
  );
  const replaced = await exchange(exchangeForm(await hsToken()));
  t.same(
    payloadOf(replaced.body.access_token as string).act,
    { sub: 'user-hs', via: 'app' },
    'the token provider mapping decides what reaches act',
  );
  const listed = (await call(node.url, 'GET', '/idps', { token: admin, headers })).body.idps as Array<Record<string, unknown>>;
  const hs = listed.filter((i) => i.iss === body.iss);
  t.equal(hs.length, 1, 'one record per aud and iss');
  t.same(hs[0]?.mapping, { 'sub.$': '$.sub', tier: 'gold' });
  t.notOk(JSON.stringify(listed).includes(body.key), 'the key is never listed');

  // A minted token keeps working; deleting the token provider stops new exchanges at once.
  const client = new StateBackedClient(replaced.body.access_token as string, { apiHost: node.url });
  t.match(await client.machineInstances.create('notes', { slug: 'user-hs' }), { state: 'open' });
  t.equal((await call(node.url, 'DELETE', '/token-providers/app', { token: admin, headers })).status, 204);
  t.equal((await exchange(exchangeForm(await hsToken()))).status, 403, 'no exchange for a deleted token provider');
  t.equal((await call(node.url, 'DELETE', '/token-providers/app', { token: admin, headers })).status, 404);
  t.match(await client.machineInstances.get('notes', 'user-hs'), { state: 'open' }, 'tokens minted before still work until they expire');

  t.equal((await call(node.url, 'DELETE', '/idps', { token: admin, headers, body: { aud: body.aud, iss: body.iss } })).status, 204);
  t.equal((await call(node.url, 'DELETE', '/idps', { token: admin, headers, body: { aud: body.aud, iss: body.iss } })).status, 404);
});

t.test('validation of identity and token providers', async (t) => {
  const headers = { 'x-statebacked-org-id': orgId };
  const good = { iss: 'https://x.test/', jwksUrl, algs: ['RS256'], mapping: { 'sub.$': '$.sub' } };
  for (const [body, parameter] of [
    [{ ...good, iss: undefined }, 'aud'],
    [{ ...good, key: 'c2VjcmV0' }, 'jwksUrl'],
    [{ ...good, jwksUrl: undefined }, 'key'],
    [{ ...good, jwksUrl: 'ftp://x.test/jwks' }, 'jwksUrl'],
    [{ ...good, algs: [] }, 'algs'],
    [{ ...good, algs: ['none'] }, 'algs'],
    [{ ...good, mapping: 'sub' }, 'mapping'],
    [{ ...good, mapping: { 'sub.$': 42 } }, 'mapping'],
    [{ ...good, mapping: { 'sub.$': '$..[?(@.constructor)]' } }, 'mapping'],
    [{ ...good, aud: 'has space' }, 'aud'],
    [{ ...good, jwksUrl: 'https://169.254.169.254/jwks' }, 'jwksUrl'],
    [{ ...good, jwksUrl: 'https://localhost/jwks' }, 'jwksUrl'],
    [{ ...good, jwksUrl: 'https://[::1]/jwks' }, 'jwksUrl'],
    [{ ...good, algs: ['HS256'] }, 'jwksUrl'],
  ] as const) {
    const res = await call(node.url, 'POST', '/idps', { token: admin, headers, body });
    t.equal(res.status, 400, JSON.stringify(body).slice(0, 100));
    t.equal(res.body.parameter, parameter);
  }
  for (const [body, parameter] of [
    [{ service: 'bad service', keyId: 'sbk_x', mapping: {} }, 'service'],
    [{ service: 'ok', keyId: 'sbk_AAAAAAAAAAAAAAAAAAAAAA', mapping: {} }, 'keyId'],
  ] as const) {
    const res = await call(node.url, 'POST', '/token-providers', { token: admin, headers, body });
    t.equal(res.status, 400);
    t.equal(res.body.parameter, parameter);
  }
  const noScope = await call(node.url, 'GET', '/idps', { token: 'a.b.c' });
  t.equal(noScope.status, 403);
});

t.test(
  'configured through one node, exchanged through another',
  { skip: node.nodes && node.nodes.length > 1 ? false : 'a cluster only' },
  async (t) => {
    const [first, second] = (node.nodes ?? []).map((n) => n.url);
    const headers = { 'x-statebacked-org-id': orgId };
    const key = (await call(first as string, 'POST', '/keys', { token: admin, headers, body: { name: 'cross', use: 'production' } })).body;
    t.equal(
      (
        await call(first as string, 'POST', '/token-providers', {
          token: admin,
          headers,
          body: { service: 'cross', keyId: key.id, mapping: { 'sub.$': '$.sub', via: 'app' } },
        })
      ).status,
      204,
    );
    t.equal(
      (
        await call(first as string, 'POST', '/idps', {
          token: admin,
          headers,
          body: { aud: 'cross-aud', jwksUrl, algs: ['ES256'], mapping: { 'sub.$': '$.sub' } },
        })
      ).status,
      204,
    );
    const res = await exchange(
      exchangeForm(await idpToken({ sub: 'user-x' }, { key: ec.privateKey, alg: 'ES256', kid: 'ec-1', aud: 'cross-aud' }), 'cross'),
      second as string,
    );
    t.equal(res.status, 200);
    const client = new StateBackedClient(res.body.access_token as string, { apiHost: second as string });
    t.match(await client.machineInstances.create('notes', { slug: 'user-x' }), { state: 'open' });
    t.equal((await call(first as string, 'DELETE', '/token-providers/cross', { token: admin, headers })).status, 204);
    const after = await exchange(
      exchangeForm(await idpToken({ sub: 'user-x' }, { key: ec.privateKey, alg: 'ES256', kid: 'ec-1', aud: 'cross-aud' }), 'cross'),
      second as string,
    );
    t.equal(after.status, 403, 'a deletion through one node stops exchanges on the other at once');
  },
);

t.test('POST /tokens is rate-limited per client address', onlyEmbedded('the limits are per node; one node shows them'), async (t) => {
  const limited = await startNode({ args: ['--token-exchanges-per-address', '1'] });
  t.teardown(() => limited.stop());
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await exchange(exchangeForm('a.b.c'), limited.url)).status);
  t.same(statuses.slice(0, 2), [400, 400], 'a burst of two');
  t.ok(statuses.slice(2).includes(429), `then 429 (${statuses.join(', ')})`);
});

t.test('identity providers, token providers and anonymous access survive a restart', async (t) => {
  // (the file's last test: it restarts the file's node)
  const first = node;
  const operatorOf = (n: typeof first) => ({ token: n.adminKey as string });
  const org = (await call(first.url, 'POST', '/orgs', { ...operatorOf(first), body: { name: 'restarted' } })).body.id as string;
  const key = (
    await call(first.url, 'POST', '/keys', {
      ...operatorOf(first),
      headers: { 'x-statebacked-org-id': org },
      body: { name: 'k', use: 'production' },
    })
  ).body;
  const secret = 'restart secret';
  await call(first.url, 'POST', '/token-providers', {
    ...operatorOf(first),
    headers: { 'x-statebacked-org-id': org },
    body: { service: 'svc', keyId: key.id, mapping: { 'sub.$': '$.sub' } },
  });
  await call(first.url, 'POST', '/idps', {
    ...operatorOf(first),
    headers: { 'x-statebacked-org-id': org },
    body: { iss: 'https://restart.test/', key: Buffer.from(secret).toString('base64url'), algs: ['HS256'], mapping: { 'sub.$': '$.sub' } },
  });
  const subject = () =>
    idpToken({ sub: 'u' }, { key: new TextEncoder().encode(secret), alg: 'HS256', kid: '', iss: 'https://restart.test/' });
  t.equal((await exchange(exchangeForm(await subject(), 'svc', org), first.url)).status, 200);
  await first.stop();

  node = await startNode({ dataDir: nodeDir, args: nodeArgs });
  const second = node;
  const again = await exchange(exchangeForm(await subject(), 'svc', org), second.url);
  t.equal(again.status, 200, 'the sealed key opens after the restart');
  t.same(payloadOf(again.body.access_token as string).act, { sub: 'u' });
  const anonymous = new StateBackedClient({ anonymous: { orgId: org } }, { apiHost: second.url });
  await t.rejects(
    anonymous.machineInstances.get('notes', 'x'),
    errors.NotFoundError,
    'the anonymous token works (the machine does not exist in this org)',
  );
});
