import { createSign, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, type KeyLike, SignJWT } from 'jose';
import t, { type Test } from 'tap';
import { JwksCache, JwksFailure } from '../src/auth/jwks-cache.js';
import {
  type IdentityProviderVerification,
  idpKeyProblem,
  idpMatches,
  pickIdp,
  type RefusalCategory,
  SubjectTokenRefused,
  unverifiedClaims,
  verifySubjectToken,
} from '../src/auth/subject-token.js';
import { parseAllowList } from '../src/sandbox/egress-policy.js';

// ---------------------------------------------------------------------------------------------------
// A JWKS server on loopback whose documents the tests change, counting requests per path.

const documents = new Map<string, () => string>();
const hits = new Map<string, number>();
const slowResponses = new Set<ServerResponse>();
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  const path = req.url ?? '/';
  hits.set(path, (hits.get(path) ?? 0) + 1);
  if (path === '/slow') {
    slowResponses.add(res);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"keys": [');
    return; // never finished: the client's timeout has to end it
  }
  if (path === '/status-500') return void res.writeHead(500).end('{"keys":[]}');
  const body = documents.get(path);
  if (!body) return void res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(body());
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
const base = `http://127.0.0.1:${port}`;
const allow = parseAllowList([`127.0.0.1:${port}`]);
t.teardown(() => {
  for (const res of slowResponses) res.destroy();
  server.closeAllConnections();
  server.close();
});

const count = (path: string): number => hits.get(path) ?? 0;
const serve = (path: string, keys: JWK[]): void => void documents.set(path, () => JSON.stringify({ keys }));

// ---------------------------------------------------------------------------------------------------
// Keys and tokens

interface Pair {
  privateKey: KeyLike;
  publicKey: KeyLike;
  jwk: JWK;
}
const pair = async (alg: string, kid: string | undefined, options: Record<string, unknown> = {}): Promise<Pair> => {
  const { privateKey, publicKey } = await generateKeyPair(alg, options);
  const jwk = { ...(await exportJWK(publicKey)), ...(kid !== undefined ? { kid } : {}), use: 'sig' };
  return { privateKey, publicKey, jwk };
};
const rsa = await pair('RS256', 'rsa-1');
const ec = await pair('ES256', 'ec-1');
const ed = await pair('EdDSA', 'ed-1', { crv: 'Ed25519' });
const impostor = await pair('RS256', 'rsa-1');
const rotated = await pair('RS256', 'rsa-2');

const AUD = 'https://example.eu.auth0.com/api/v2/';
const ISS = 'https://example.eu.auth0.com/';
const NOW = Math.floor(Date.now() / 1000);

const sign = async (
  key: KeyLike | Uint8Array,
  header: { alg: string; kid?: string; [k: string]: unknown },
  claims: Record<string, unknown> = {},
  times: { exp?: number | null; nbf?: number } = {},
): Promise<string> => {
  let jwt = new SignJWT({ sub: 'user-1', aud: AUD, iss: ISS, ...claims }).setProtectedHeader(header).setIssuedAt(NOW);
  if (times.exp !== null) jwt = jwt.setExpirationTime(times.exp ?? NOW + 3600);
  if (times.nbf !== undefined) jwt = jwt.setNotBefore(times.nbf);
  return jwt.sign(key);
};

const newCache = (options: Partial<ConstructorParameters<typeof JwksCache>[0]> = {}): JwksCache =>
  new JwksCache({ allow, timeoutMs: 2_000, minRefreshIntervalMs: 60_000, ...options });

const jwksIdp = (path: string, algs: string[] = ['RS256', 'ES256', 'EdDSA']): IdentityProviderVerification => ({
  aud: AUD,
  iss: ISS,
  algs,
  jwksUrl: `${base}${path}`,
});

const refused = async (
  t: Test,
  p: Promise<unknown>,
  category: RefusalCategory,
  reason?: RegExp,
): Promise<SubjectTokenRefused | undefined> => {
  try {
    await p;
    t.fail(`expected a ${category} refusal, but it verified`);
    return undefined;
  } catch (e) {
    t.type(e, SubjectTokenRefused);
    t.equal((e as SubjectTokenRefused).category, category, `refused as ${category}: ${(e as Error).message}`);
    if (reason) t.match((e as Error).message, reason);
    return e as SubjectTokenRefused;
  }
};

// ---------------------------------------------------------------------------------------------------

t.test('RS256, ES256 and EdDSA tokens verify against a JWKS; one fetch serves them all', async (t) => {
  serve('/a', [rsa.jwk, ec.jwk, ed.jwk]);
  const cache = newCache();
  const idp = jwksIdp('/a');
  const claims = await verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, { role: { id: 'r' } }), idp, cache);
  t.match(claims, { sub: 'user-1', aud: AUD, iss: ISS, role: { id: 'r' } });
  t.equal((await verifySubjectToken(await sign(ec.privateKey, { alg: 'ES256', kid: 'ec-1' }), idp, cache)).sub, 'user-1');
  t.equal((await verifySubjectToken(await sign(ed.privateKey, { alg: 'EdDSA', kid: 'ed-1' }), idp, cache)).sub, 'user-1');
  t.equal(count('/a'), 1, 'the document was fetched once');
});

t.test('refusals: wrong key, aud, iss, algorithm, expiry, nbf, missing exp, alg none, crit', async (t) => {
  serve('/b', [rsa.jwk, ec.jwk]);
  const cache = newCache();
  const idp = jwksIdp('/b', ['RS256']);
  await refused(
    t,
    verifySubjectToken(await sign(impostor.privateKey, { alg: 'RS256', kid: 'rsa-1' }), idp, cache),
    'signature',
    /signature verification failed/,
  );
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, { aud: 'https://other/' }), idp, cache),
    'claims',
    /aud/,
  );
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, { iss: 'https://other/' }), idp, cache),
    'claims',
    /iss/,
  );
  await refused(t, verifySubjectToken(await sign(ec.privateKey, { alg: 'ES256', kid: 'ec-1' }), idp, cache), 'algorithm');
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, {}, { exp: NOW - 60 }), idp, cache),
    'expired',
  );
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, {}, { nbf: NOW + 60 }), idp, cache),
    'not-yet-valid',
  );
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, {}, { exp: null }), idp, cache),
    'claims',
    /exp/,
  );
  const valid = await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' });
  const [, payload] = valid.split('.');
  // (by hand: jose will not sign with a crit it does not know; b64 it knows, and would accept)
  for (const crit of [
    { crit: ['x'], x: 1 },
    { crit: ['b64'], b64: true },
  ]) {
    const critInput = `${Buffer.from(JSON.stringify({ alg: 'RS256', kid: 'rsa-1', ...crit })).toString('base64url')}.${payload}`;
    const critToken = `${critInput}.${createSign('RSA-SHA256')
      .update(critInput)
      .sign(rsa.privateKey as KeyObject)
      .toString('base64url')}`;
    await refused(t, verifySubjectToken(critToken, idp, cache), 'algorithm', /crit header/);
  }
  const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'rsa-1' })).toString('base64url')}.${payload}.`;
  await refused(t, verifySubjectToken(unsigned, { ...idp, algs: ['RS256', 'none'] }, cache), 'algorithm');
  await refused(t, verifySubjectToken('not-a-jwt', idp, cache), 'malformed');
  await refused(t, verifySubjectToken(`${valid}x`, idp, cache), 'signature');
  t.ok(await verifySubjectToken(valid, idp, cache), 'and the genuine token still verifies');
  t.ok(await verifySubjectToken(valid, { ...idp, aud: undefined }, cache), 'an IdP without aud does not check aud');
});

t.test('clock tolerance is 5 s either way', async (t) => {
  serve('/c', [rsa.jwk]);
  const cache = newCache();
  const idp = jwksIdp('/c', ['RS256']);
  const token = await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }, {}, { exp: NOW + 100, nbf: NOW });
  t.ok(await verifySubjectToken(token, idp, cache, NOW + 104), 'exp passed 4 s ago');
  await refused(t, verifySubjectToken(token, idp, cache, NOW + 106), 'expired');
  t.ok(await verifySubjectToken(token, idp, cache, NOW - 4), 'nbf 4 s ahead');
  await refused(t, verifySubjectToken(token, idp, cache, NOW - 6), 'not-yet-valid');
});

t.test('an unknown kid refetches once per interval; concurrent callers share one fetch', async (t) => {
  let now = 1_000_000;
  serve('/d', [rsa.jwk]);
  const cache = newCache({ now: () => now, minRefreshIntervalMs: 30_000 });
  const idp = jwksIdp('/d', ['RS256']);
  const tokens = await Promise.all(Array.from({ length: 10 }, () => sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' })));
  await Promise.all(tokens.map((token) => verifySubjectToken(token, idp, cache)));
  t.equal(count('/d'), 1, '10 concurrent first verifications: one fetch');

  const unknown = await Promise.all(Array.from({ length: 10 }, () => sign(impostor.privateKey, { alg: 'RS256', kid: 'unknown' })));
  now += 20_000;
  await refused(t, verifySubjectToken(unknown[0] as string, idp, cache), 'signature');
  t.equal(count('/d'), 1, 'an unknown kid 20 s after the fetch: no refetch');
  now += 11_000;
  const results = await Promise.allSettled(unknown.map((token) => verifySubjectToken(token, idp, cache)));
  t.ok(
    results.every((r) => r.status === 'rejected' && (r.reason as SubjectTokenRefused).category === 'signature'),
    'all refused',
  );
  t.match((results[0] as PromiseRejectedResult).reason.message, /no key with kid "unknown"/);
  t.equal(count('/d'), 2, '10 concurrent unknown kids: exactly one refetch');
  await refused(t, verifySubjectToken(unknown[0] as string, idp, cache), 'signature');
  t.equal(count('/d'), 2, 'another unknown kid within the interval: no fetch');
  t.ok(await verifySubjectToken(tokens[0] as string, idp, cache), 'known kids still verify from the cache');
  t.equal(count('/d'), 2);
});

t.test('a rotated key is picked up: unknown kid after the interval, and at expiry of the document', async (t) => {
  let now = 1_000_000;
  serve('/e', [rsa.jwk]);
  const cache = newCache({ now: () => now, minRefreshIntervalMs: 30_000, ttlMs: 600_000 });
  const idp = jwksIdp('/e', ['RS256']);
  t.ok(await verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }), idp, cache));
  serve('/e', [rsa.jwk, rotated.jwk]);
  const fresh = await sign(rotated.privateKey, { alg: 'RS256', kid: 'rsa-2' });
  now += 31_000;
  t.ok(await verifySubjectToken(fresh, idp, cache), 'an unknown kid 31 s after the fetch refetches');
  t.equal(count('/e'), 2);
  serve('/e', [rotated.jwk]);
  now += 10_000;
  t.ok(
    await verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }), idp, cache),
    'the retired key still verifies until the document expires',
  );
  now += 600_000;
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }), idp, cache),
    'signature',
    /no key with kid "rsa-1"/,
  );
  t.equal(count('/e'), 3, 'an expired document is fetched again');
  t.ok(await verifySubjectToken(fresh, idp, cache));
  t.equal(count('/e'), 3);
});

t.test('tokens without kid: the one usable key, or refused when several fit', async (t) => {
  const { kid: _ignored, ...rsaNoKid } = rsa.jwk;
  serve('/f', [rsaNoKid, ec.jwk]);
  const cache = newCache();
  t.ok(await verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256' }), jwksIdp('/f'), cache), 'RS256: the only RSA key');
  t.ok(await verifySubjectToken(await sign(ec.privateKey, { alg: 'ES256' }), jwksIdp('/f'), cache), 'ES256: the only P-256 key');
  serve('/g', [rsa.jwk, rotated.jwk]);
  await refused(t, verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256' }), jwksIdp('/g'), cache), 'signature', /several keys/);
  serve('/h', [{ ...rsa.jwk, use: 'enc' }]);
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }), jwksIdp('/h'), cache),
    'signature',
    /no key/,
  );
  serve('/i', [{ ...rsa.jwk, alg: 'PS256' }]);
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }), jwksIdp('/i'), cache),
    'signature',
    /no key/,
  );
});

t.test('JWKS URLs go through the egress policy', async (t) => {
  serve('/j', [rsa.jwk]);
  const token = await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' });
  const closed = newCache({ allow: [] });
  await refused(t, verifySubjectToken(token, jwksIdp('/j'), closed), 'key-unavailable', /loopback address and not in the allow-list/);
  await refused(
    t,
    verifySubjectToken(token, { ...jwksIdp('/j'), jwksUrl: `https://127.0.0.1:${port}/j` }, closed),
    'key-unavailable',
    /loopback address and not in the allow-list/,
  );
  const rebinding = newCache({ allow: [], lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
  await refused(
    t,
    verifySubjectToken(token, { ...jwksIdp('/j'), jwksUrl: `https://idp.example.com:${port}/j` }, rebinding),
    'key-unavailable',
    /idp\.example\.com \(127\.0\.0\.1\) is a loopback address/,
  );
  t.equal(count('/j'), 0, 'nothing reached the server');
  await t.rejects(closed.getKey('file:///etc/passwd', { alg: 'RS256' }), { code: 'url-refused' });
  t.equal(closed.urlProblem(`https://user:pw@idp.example.com/`), 'jwksUrl: URLs with credentials are not allowed');
  t.equal(closed.urlProblem('https://idp.example.com/.well-known/jwks.json'), undefined);
  t.equal(newCache().urlProblem(`${base}/j`), undefined, 'http to a host in the allow list is fine');
  t.ok(await verifySubjectToken(token, jwksIdp('/j'), newCache()));
  t.equal(count('/j'), 1);
});

t.test('bad documents fail cleanly, and a failure is not retried within the interval', async (t) => {
  documents.set('/big', () => JSON.stringify({ keys: [rsa.jwk], pad: 'x'.repeat(300 * 1024) }));
  documents.set('/not-json', () => '<html>hello</html>');
  documents.set('/no-keys', () => JSON.stringify({ key: [rsa.jwk] }));
  const cache = newCache({ timeoutMs: 500 });
  const expect = async (path: string, code: string, message: RegExp) => {
    const e = await cache.getKey(`${base}${path}`, { alg: 'RS256', kid: 'rsa-1' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.type(e, JwksFailure, path);
    t.equal((e as JwksFailure).code, code, `${path}: ${(e as Error).message}`);
    t.match((e as Error).message, message);
  };
  await expect('/big', 'fetch-failed', /exceeds the limit of 262144 bytes/);
  await expect('/not-json', 'bad-document', /did not answer JSON/);
  await expect('/no-keys', 'bad-document', /without a "keys" array/);
  await expect('/status-500', 'bad-status', /answered 500/);
  await expect('/missing', 'bad-status', /answered 404/);
  const started = Date.now();
  await expect('/slow', 'fetch-failed', /timed out after 500 ms/);
  t.ok(Date.now() - started < 1_900, 'the timeout ended the fetch');
  const before = count('/status-500');
  await expect('/status-500', 'bad-status', /answered 500/);
  t.equal(count('/status-500'), before, 'a failed URL is not fetched again within the interval');
  await refused(
    t,
    verifySubjectToken(await sign(rsa.privateKey, { alg: 'RS256', kid: 'rsa-1' }), jwksIdp('/not-json'), cache),
    'key-unavailable',
  );
});

t.test('the cache keeps a bounded number of URLs', async (t) => {
  for (const path of ['/k1', '/k2', '/k3']) serve(path, [rsa.jwk]);
  const cache = newCache({ maxUrls: 2 });
  for (const path of ['/k1', '/k2', '/k3']) await cache.getKey(`${base}${path}`, { alg: 'RS256', kid: 'rsa-1' });
  t.equal(cache.size, 2);
  await cache.getKey(`${base}/k3`, { alg: 'RS256', kid: 'rsa-1' });
  t.equal(count('/k3'), 1, 'the newest stayed');
  await cache.getKey(`${base}/k1`, { alg: 'RS256', kid: 'rsa-1' });
  t.equal(count('/k1'), 2, 'the oldest was evicted and is fetched again');
});

t.test('a configured key: HMAC secret bytes, PEM, DER SPKI or JWK', async (t) => {
  const cache = newCache({ allow: [] });
  // The anonymous client's token (wire-protocol §4.1): HS256 keyed by the org ID's UTF-8 bytes, typ JWT.
  const orgId = 'org_0123456789abcdef';
  const anon = `https://${orgId}.anonymous.auth.statebacked.dev`;
  const anonIdp = { aud: anon, iss: anon, algs: ['HS256'], key: Buffer.from(orgId, 'utf8') };
  const anonToken = await new SignJWT({ sid: 's1', did: 'd1' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setAudience(anon)
    .setIssuer(anon)
    .setIssuedAt()
    .setExpirationTime('1d')
    .sign(Buffer.from(orgId, 'utf8'));
  t.match(await verifySubjectToken(anonToken, anonIdp, cache), { sid: 's1', did: 'd1' });
  const refusal = await refused(
    t,
    verifySubjectToken(anonToken, { ...anonIdp, key: Buffer.from('org_other', 'utf8') }, cache),
    'signature',
  );
  t.notMatch(refusal?.message ?? '', /org_/, 'the reason does not carry the key');
  t.equal(idpKeyProblem(anonIdp), undefined);

  const pem = await exportSPKI(rsa.publicKey);
  const pemIdp = { aud: AUD, iss: ISS, algs: ['RS256'], key: Buffer.from(pem) };
  const rsToken = await sign(rsa.privateKey, { alg: 'RS256' });
  t.ok(await verifySubjectToken(rsToken, pemIdp, cache), 'PEM SPKI');
  const der = Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
  t.ok(await verifySubjectToken(rsToken, { ...pemIdp, key: der }, cache), 'DER SPKI');
  t.ok(await verifySubjectToken(rsToken, { ...pemIdp, key: Buffer.from(JSON.stringify(rsa.jwk)) }, cache), 'JWK');
  await refused(t, verifySubjectToken(await sign(impostor.privateKey, { alg: 'RS256' }), pemIdp, cache), 'signature');
  const edPem = await exportSPKI(ed.publicKey);
  t.ok(
    await verifySubjectToken(
      await sign(ed.privateKey, { alg: 'EdDSA' }),
      { aud: AUD, iss: ISS, algs: ['EdDSA'], key: Buffer.from(edPem) },
      cache,
    ),
    'EdDSA with a PEM key',
  );

  // RS256→HS256 confusion: an HS256 token whose secret is the public key's PEM text.
  const forged = await sign(Buffer.from(pem), { alg: 'HS256' });
  await refused(
    t,
    verifySubjectToken(forged, { ...pemIdp, algs: ['RS256', 'HS256'] }, cache),
    'signature',
    /public key; the token is signed HS256/,
  );
  t.match(idpKeyProblem({ ...pemIdp, algs: ['RS256', 'HS256'] }), /public key, so algs may not list HS256/);
  t.match(idpKeyProblem({ ...anonIdp, algs: ['HS256', 'RS256'] }), /HMAC secret, so algs may list only/);
  t.match(idpKeyProblem({ ...pemIdp, key: Buffer.from('-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----') }), /looks like PEM/);
  t.match(idpKeyProblem({ aud: AUD, algs: ['HS256'], jwksUrl: 'https://x/' }), /need a key/);
  t.match(idpKeyProblem({ aud: AUD, algs: ['none'], key: Buffer.from('k') }), /unsupported algorithm "none"/);
  t.match(idpKeyProblem({ aud: AUD, algs: ['RS256'] }), /exactly one of key and jwksUrl/);
  await refused(
    t,
    verifySubjectToken(await sign(Buffer.from('s'), { alg: 'HS256' }), { aud: AUD, algs: ['HS256'], jwksUrl: 'https://x/' }, cache),
    'algorithm',
    /cannot be verified with a JWKS/,
  );
});

t.test('choosing the IdP from unverified claims', async (t) => {
  const token = await sign(rsa.privateKey, { alg: 'RS256' }, { aud: ['https://a/', AUD] });
  const claims = await unverifiedClaims(token);
  t.ok(idpMatches({ aud: AUD }, claims), 'aud in an array');
  t.ok(idpMatches({ iss: ISS }, claims));
  t.ok(idpMatches({ aud: AUD, iss: ISS }, claims));
  t.notOk(idpMatches({ aud: AUD, iss: 'https://other/' }, claims), 'every configured side must match');
  t.notOk(idpMatches({}, claims), 'an IdP configuring neither side matches nothing');
  const onlyIss = { iss: ISS, name: 'iss' };
  const both = { aud: AUD, iss: ISS, name: 'both' };
  t.equal(pickIdp([onlyIss, both], claims), both, 'the more specific wins');
  t.equal(pickIdp([onlyIss, { aud: 'x' }], claims), onlyIss);
  t.equal(pickIdp([{ aud: 'x' }], claims), undefined);
  await t.rejects(unverifiedClaims('a.b'), SubjectTokenRefused);
  await t.rejects(unverifiedClaims(`${'a'.repeat(40_000)}.b.c`), /longer than/);
  const deep = `e30.${Buffer.from(`{"a":${'['.repeat(200)}${']'.repeat(200)}}`).toString('base64url')}.sig`;
  await t.rejects(unverifiedClaims(deep), /nest too deeply/);
});
