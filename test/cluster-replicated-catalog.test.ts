import t from 'tap';
import { type CatalogOp, ReplicatedCatalog, applyCatalogOp } from '../src/store/jetstream/replicated-catalog.js';
import { JetStreamOpLog } from '../src/store/jetstream/op-log.js';
import { localNode, natsMissing, startNats } from './helpers/nats.js';

/** Two nodes' LMDB catalogs kept equal through the META log on a real nats-server. */

const skip = natsMissing();

t.test('writes on either node land on both; racing creates of one machine: exactly one wins', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const fail = (message: string, error: unknown) => t.fail(`${message}: ${String(error)}`);
  const node = async (name: string) => {
    const { store, nc, beforeClose } = await localNode(t, nats, name);
    const log = await JetStreamOpLog.open<CatalogOp>(nc, { cluster: 'c', name: 'META', replicas: 1, from: 1 }, applyCatalogOp(store.catalog), fail);
    beforeClose(() => log.close());
    return { store, log, catalog: new ReplicatedCatalog(store.catalog, log) };
  };
  const a = await node('a');
  const b = await node('b');
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
  t.same(a.catalog.listMachines('org_1', undefined, 10).map((m) => m.slug), ['m']);
  t.equal(await b.catalog.deleteKey('org_1', 'sbk_1'), true);
  await a.log.catchUp();
  t.equal(a.catalog.getKey('sbk_1'), undefined, 'a key deleted on b is gone on a');
  t.equal(await a.catalog.deleteKey('org_1', 'sbk_1'), false, 'deleting it again: false, as locally');
});
