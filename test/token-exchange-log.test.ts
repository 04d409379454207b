import t from 'tap';
import type { JwksCache } from '../src/auth/jwks-cache.js';
import type { KeyRing } from '../src/auth/key-ring.js';
import type { SecretSealer } from '../src/auth/secret-sealer.js';
import { TokenExchange } from '../src/auth/token-exchange.js';
import type { Catalog } from '../src/store/catalog.js';

t.test('refusals, which anyone can cause, are logged at most ten a second; the next line counts the rest', async (t) => {
  let now = 1_000_000;
  const lines: Array<Record<string, unknown> | undefined> = [];
  const exchange = new TokenExchange({
    catalog: { getOrg: () => undefined } as unknown as Catalog,
    keyRing: {} as KeyRing,
    sealer: {} as SecretSealer,
    jwks: {} as JwksCache,
    logger: { info: (_message, fields) => lines.push(fields), warn: () => undefined, error: () => undefined },
    maxIdentityProviders: 10,
    now: () => now,
  });
  const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';
  for (let i = 0; i < 25; i++)
    await t.rejects(exchange.exchange({ orgId: 'org_x', service: 's', subjectToken: token }), {
      name: 'OAuthError',
      oauthCode: 'invalid_grant',
    });
  t.equal(lines.length, 10);
  t.match(lines[0], { org: 'org_x', service: 's', reason: 'the org does not exist' });
  now += 1_000;
  await t.rejects(exchange.exchange({ orgId: 'org_x', service: 's', subjectToken: token }));
  t.equal(lines.length, 11);
  t.equal(lines[10]?.notLoggedBefore, 15, 'the first line of the next second says how many were left out');
});
