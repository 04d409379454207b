import t from 'tap';
import { type CatalogOp, ReplicatedCatalog, applyCatalogOp } from '../src/store/jetstream/replicated-catalog.js';
import { JetStreamOpLog } from '../src/store/jetstream/op-log.js';
import { localNode, natsMissing, startNats } from './helpers/nats.js';

/** Two nodes' LMDB catalogs kept equal through the META log on a real nats-server. */

const skip = natsMissing();

/** Two nodes on one nats-server, each with its LMDB catalog behind the META log. */
const twoNodes = async (t: { teardown(fn: () => unknown): void; fail(message: string): unknown }) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const fail = (message: string, error: unknown) => t.fail(`${message}: ${String(error)}`);
  const node = async (name: string) => {
    const { store, nc, beforeClose } = await localNode(t, nats, name);
    const log = await JetStreamOpLog.open<CatalogOp>(
      nc,
      { cluster: 'c', name: 'META', replicas: 1, from: 1 },
      applyCatalogOp(store.catalog),
      fail,
    );
    beforeClose(() => log.close());
    return { store, log, catalog: new ReplicatedCatalog(store.catalog, log) };
  };
  return { a: await node('a'), b: await node('b') };
};

t.test('writes on either node land on both; racing creates of one machine: exactly one wins', { skip }, async (t) => {
  const { a, b } = await twoNodes(t);
  const createdAt = new Date().toISOString();
  await a.catalog.createOrg({ id: 'org_1', name: 'one', createdAt, allowAnonymousAccess: true });
  await b.catalog.putKey({ id: 'sbk_1', orgId: 'org_1', name: 'k', scopes: ['state.read'], createdAt, sealedSecret: 'sealed' });
  const race = await Promise.all([
    a.catalog.createMachine({ orgId: 'org_1', slug: 'm', createdAt, indexes: [] }),
    b.catalog.createMachine({ orgId: 'org_1', slug: 'm', createdAt, indexes: [] }),
  ]);
  t.same(race.sort(), [false, true], 'one create wins, the other is told the machine exists');
  t.equal(b.catalog.getOrg('org_1')?.name, 'one', 'the org made on a is read on b once b wrote after it');
  await a.log.catchUp();
  t.equal(a.catalog.getKey('sbk_1')?.name, 'k', 'the key made on b is on a');
  t.same(
    a.catalog.listMachines('org_1', undefined, 10).map((m) => m.slug),
    ['m'],
  );
  t.equal(await b.catalog.deleteKey('org_1', 'sbk_1'), true);
  await a.log.catchUp();
  t.equal(a.catalog.getKey('sbk_1'), undefined, 'a key deleted on b is gone on a');
  t.equal(await a.catalog.deleteKey('org_1', 'sbk_1'), false, 'deleting it again: false, as locally');
});

t.test('two nodes making the bootstrap org (one id) after one provisioned it: one org, one anonymous-access key', { skip }, async (t) => {
  const { SecretSealer } = await import('../src/auth/secret-sealer.js');
  const { provisionAnonymousAccess } = await import('../src/auth/anonymous-access.js');
  const { a, b } = await twoNodes(t);
  const sealer = new SecretSealer(Buffer.alloc(32, 7));
  const org = { id: 'org_boot', name: 'default', createdAt: new Date().toISOString(), allowAnonymousAccess: true };
  // a starts first: makes the org and its records; b found no org before a's writes reached it
  await a.catalog.createOrg(org);
  t.same(await provisionAnonymousAccess(a.catalog, sealer), ['org_boot']);
  await b.catalog.createOrg({ ...org, createdAt: new Date(Date.now() + 5).toISOString() });
  t.same(await provisionAnonymousAccess(b.catalog, sealer), [], 'b finds the org provisioned');
  await a.log.catchUp();
  for (const node of [a, b])
    t.same(
      node.catalog.listKeys('org_boot', undefined, 10).map((k) => k.name),
      ['anonymous access'],
      'one anonymous-access key',
    );
  t.equal(b.catalog.getOrg('org_boot')?.createdAt, org.createdAt, 'the org as it was made first');
});

t.test(
  'identity and token providers replicate; racing anonymous provisioning of one org: the first wins everywhere',
  { skip },
  async (t) => {
    const { SecretSealer } = await import('../src/auth/secret-sealer.js');
    const { anonymousAccessRecords } = await import('../src/auth/anonymous-access.js');
    const { a, b } = await twoNodes(t);
    const sealer = new SecretSealer(Buffer.alloc(32, 7));
    const createdAt = new Date().toISOString();
    await a.catalog.createOrg({ id: 'org_1', name: 'one', createdAt, allowAnonymousAccess: true });
    await b.log.catchUp();

    // Two nodes start at once and both find the org without its records: each proposes its own.
    const raced = await Promise.all([
      a.catalog.provisionAnonymousAccess('org_1', anonymousAccessRecords('org_1', sealer)),
      b.catalog.provisionAnonymousAccess('org_1', anonymousAccessRecords('org_1', sealer)),
    ]);
    t.same(raced.sort(), [false, true], 'one provisioning applies');
    await a.log.catchUp();
    await b.log.catchUp();
    const keyOnA = a.catalog.getOrg('org_1')?.anonymousKeyId;
    t.ok(keyOnA, 'the org names its anonymous key');
    t.equal(b.catalog.getOrg('org_1')?.anonymousKeyId, keyOnA, 'the same key on both nodes');
    t.same(
      a.catalog.listKeys('org_1', undefined, 10).map((k) => k.id),
      [keyOnA],
      'the losing proposal left no key behind',
    );
    t.equal(b.catalog.getTokenProvider('org_1', 'anonymous-statebacked-dev')?.keyId, keyOnA);
    t.equal(a.catalog.listIdentityProviders('org_1', undefined, 10).length, 1);

    const idp = {
      orgId: 'org_1',
      aud: 'app',
      iss: '',
      algs: ['RS256' as const],
      jwksUrl: 'https://idp.test/jwks',
      mapping: { 'sub.$': '$.sub' },
      createdAt,
      updatedAt: createdAt,
    };
    t.equal(await a.catalog.putIdentityProvider(idp, 2), true);
    t.equal(await b.catalog.putIdentityProvider({ ...idp, aud: 'other' }, 2), false, 'the per-org limit holds across nodes');
    t.equal(
      await b.catalog.putIdentityProvider({ ...idp, mapping: {}, createdAt: 'later', updatedAt: 'later' }, 2),
      true,
      'an upsert of an existing one is no new one',
    );
    await a.log.catchUp();
    t.match(
      a.catalog.listIdentityProviders('org_1', undefined, 10).find((i) => i.aud === 'app'),
      { mapping: {}, createdAt, updatedAt: 'later' },
      'replaced, its createdAt kept',
    );
    t.equal(
      await a.catalog.putTokenProvider(
        { orgId: 'org_1', service: 'svc', keyId: keyOnA as string, mapping: {}, createdAt, updatedAt: createdAt },
        5,
      ),
      true,
    );
    await b.log.catchUp();
    t.same(
      b.catalog.listTokenProviders('org_1', undefined, 10).map((p) => p.service),
      ['anonymous-statebacked-dev', 'svc'],
    );
    t.same(
      b.catalog.listTokenProviders('org_1', 'anonymous-statebacked-dev', 10).map((p) => p.service),
      ['svc'],
      'paged after a service',
    );

    // Off: the three records go, on every node; the other providers stay.
    t.equal(await b.catalog.setAnonymousAccess('org_1', undefined), true);
    await a.log.catchUp();
    t.equal(a.catalog.getOrg('org_1')?.allowAnonymousAccess, false);
    t.equal(a.catalog.getKey(keyOnA as string), undefined);
    t.equal(a.catalog.getTokenProvider('org_1', 'anonymous-statebacked-dev'), undefined);
    t.same(
      a.catalog.listIdentityProviders('org_1', undefined, 10).map((i) => i.aud),
      ['app'],
    );
    t.equal(await a.catalog.deleteIdentityProvider('org_1', 'app', ''), true);
    t.equal(await a.catalog.deleteTokenProvider('org_1', 'svc'), true);
    await b.log.catchUp();
    t.same(b.catalog.listIdentityProviders('org_1', undefined, 10), []);
    t.equal(await b.catalog.setAnonymousAccess('org_missing', undefined), false);

    // A node provisioning an old org after an admin switched anonymous access off changes nothing.
    t.equal(await a.catalog.provisionAnonymousAccess('org_1', anonymousAccessRecords('org_1', sealer)), false);
    await b.log.catchUp();
    t.equal(b.catalog.getOrg('org_1')?.allowAnonymousAccess, false, 'still off');
    t.same(b.catalog.listTokenProviders('org_1', undefined, 10), []);

    // On again, then the anonymous key is deleted by hand: switching on again repairs the records.
    t.equal(await a.catalog.setAnonymousAccess('org_1', anonymousAccessRecords('org_1', sealer)), true);
    const onKey = a.catalog.getOrg('org_1')?.anonymousKeyId as string;
    t.equal(await a.catalog.setAnonymousAccess('org_1', anonymousAccessRecords('org_1', sealer)), true);
    t.equal(a.catalog.getOrg('org_1')?.anonymousKeyId, onKey, 'intact records are kept');
    await b.catalog.deleteKey('org_1', onKey);
    t.equal(await b.catalog.setAnonymousAccess('org_1', anonymousAccessRecords('org_1', sealer)), true);
    await a.log.catchUp();
    const repaired = a.catalog.getOrg('org_1')?.anonymousKeyId as string;
    t.not(repaired, onKey, 'a new key');
    t.equal(a.catalog.getTokenProvider('org_1', 'anonymous-statebacked-dev')?.keyId, repaired, 'the token provider signs with it');
    t.same(
      a.catalog.listKeys('org_1', undefined, 10).map((k) => k.id),
      [repaired],
    );
  },
);

t.test("a node's key ring stops finding a key deleted through another node, once the deletion is applied", { skip }, async (t) => {
  const { SecretSealer } = await import('../src/auth/secret-sealer.js');
  const { KeyRing } = await import('../src/auth/key-ring.js');
  const { a, b } = await twoNodes(t);
  const sealer = new SecretSealer(Buffer.alloc(32, 7));
  const createdAt = new Date().toISOString();
  await a.catalog.createOrg({ id: 'org_1', name: 'one', createdAt, allowAnonymousAccess: false });
  const sealedSecret = sealer.seal('the-secret', 'sbk_ring');
  await a.catalog.putKey({ id: 'sbk_ring', orgId: 'org_1', name: 'k', scopes: ['state.read'], createdAt, sealedSecret });
  const ring = new KeyRing(a.catalog, sealer);
  const found = ring.find('sbk_ring');
  t.equal(found?.secret.toString('utf8'), 'the-secret');
  t.equal(ring.find('sbk_ring'), found, 'found again from its cache while no key was written');
  const generation = a.catalog.keysGeneration;
  t.equal(await b.catalog.deleteKey('org_1', 'sbk_ring'), true);
  await a.log.catchUp();
  t.ok(a.catalog.keysGeneration > generation, "applying the deletion on a moved a's key generation on");
  t.equal(ring.find('sbk_ring'), undefined, 'the ring on a no longer finds the key, without being told to forget it');
});
