// What a token exchange costs (issue 19): POST /tokens for an anonymous session (HS256 with the org
// id), for an HS256 identity provider with a shared secret, and for an RS256 identity provider behind
// a local JWKS server (cached after the first fetch); C concurrent clients (EXCHANGE_C, default 16),
// N exchanges each kind (EXCHANGE_N, default 3,000). Prints exchanges/s and p50/p99 per kind, and
// writes them to bench/results/token-exchange-<time>.json.
//
//   node --no-node-snapshot bench/probes/token-exchange.mjs        (after `make build`)
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { startServer } from '../lib/server-process.mjs';
import { writeProbeReport } from '../lib/probe-report.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const N = Number(process.env.EXCHANGE_N ?? 3000);
const C = Number(process.env.EXCHANGE_C ?? 16);
const adminKey = `bench-exchange-${Date.now()}`;

const rsa = await generateKeyPair('RS256');
const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(rsa.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] });
let jwksFetches = 0;
const jwksServer = createServer((req, res) => {
  jwksFetches++;
  res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
});
await new Promise((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
const jwksPort = jwksServer.address().port;

const quantile = (values, q) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];
const server = await startServer({
  repoRoot,
  adminKey,
  label: 'token-exchange',
  args: ['--fetch-allow', `127.0.0.1:${jwksPort}`, '--token-exchanges-per-address', '1000000', '--token-exchanges-per-second', '1000000'],
});
try {
  const api = (method, path, body) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: body && JSON.stringify(body),
    }).then(async (res) => (res.status === 204 ? undefined : res.json()));
  const orgId = (await api('GET', '/orgs')).orgs[0].id;
  const key = await api('POST', '/keys', { name: 'bench', use: 'production' });
  await api('POST', '/token-providers', { service: 'app', keyId: key.id, mapping: { 'sub.$': '$.sub', 'roles.$': '$.roles' } });
  const secret = new TextEncoder().encode('bench shared secret');
  await api('POST', '/idps', {
    iss: 'https://hs.bench/',
    key: Buffer.from(secret).toString('base64url'),
    algs: ['HS256'],
    mapping: { 'sub.$': '$.sub', 'roles.$': '$.groups' },
  });
  await api('POST', '/idps', {
    iss: 'https://rs.bench/',
    jwksUrl: `http://127.0.0.1:${jwksPort}/jwks.json`,
    algs: ['RS256'],
    mapping: { 'sub.$': '$.sub', 'roles.$': '$.groups' },
  });

  const anonymousAudience = `https://${orgId}.anonymous.auth.statebacked.dev`;
  const kinds = {
    anonymous: {
      service: 'anonymous-statebacked-dev',
      sign: (i) =>
        new SignJWT({ sid: `s${i}`, did: `d${i}` })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .setIssuer(anonymousAudience)
          .setAudience(anonymousAudience)
          .setIssuedAt()
          .setExpirationTime('1h')
          .sign(new TextEncoder().encode(orgId)),
    },
    'HS256 IdP': {
      service: 'app',
      sign: (i) =>
        new SignJWT({ sub: `u${i}`, groups: ['a', 'b'] })
          .setProtectedHeader({ alg: 'HS256' })
          .setIssuer('https://hs.bench/')
          .setIssuedAt()
          .setExpirationTime('1h')
          .sign(secret),
    },
    'RS256 IdP (JWKS)': {
      service: 'app',
      sign: (i) =>
        new SignJWT({ sub: `u${i}`, groups: ['a', 'b'] })
          .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
          .setIssuer('https://rs.bench/')
          .setIssuedAt()
          .setExpirationTime('1h')
          .sign(rsa.privateKey),
    },
  };
  const results = {};
  for (const [name, kind] of Object.entries(kinds)) {
    const tokens = await Promise.all(Array.from({ length: N }, (_, i) => kind.sign(i)));
    const body = (token) =>
      new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        audience: `https://tokens.statebacked.dev/${orgId}/${kind.service}`,
        subject_token: token,
      }).toString();
    const latencies = [];
    let failed = 0;
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: C }, async () => {
        while (next < N) {
          const token = tokens[next++];
          const t0 = performance.now();
          const res = await fetch(`${server.url}/tokens`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: body(token),
          });
          await res.arrayBuffer();
          latencies.push(performance.now() - t0);
          if (res.status !== 200) failed++;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    results[name] = {
      exchangesPerSecond: Math.round(N / seconds),
      p50Ms: +quantile(latencies, 0.5).toFixed(2),
      p99Ms: +quantile(latencies, 0.99).toFixed(2),
      failed,
    };
  }
  const report = { at: new Date().toISOString(), exchanges: N, concurrency: C, jwksFetches, results };
  console.log(JSON.stringify(report, null, 2));
  writeProbeReport('token-exchange', report);
} finally {
  await server.stop();
  jwksServer.close();
}
