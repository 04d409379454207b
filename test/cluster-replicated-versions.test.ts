import t from 'tap';
import type { MachineVersionRecord } from '../src/domain/records.js';
import { natsMissing, startNats } from './helpers/nats.js';
import { replicatedVersionsNode } from './helpers/replicated-versions-node.js';

/**
 * Two nodes' LMDB version stores kept equal through the META log (shared with the catalog) on a real
 * nats-server, the code travelling through the object store bucket; then a third node that replays the
 * whole log after the objects were cleaned up reaches the same state.
 */

const skip = natsMissing();

t.test('versions and their code: written on either node, read on both; races; sweeps; deletion; replay', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const node = (name: string) => replicatedVersionsNode(t, nats, name);
  const a = await node('a');
  const b = await node('b');
  const objects = async () => (await a.code.list()).map((info) => info.name).sort();
  const record = (id: string): MachineVersionRecord => ({
    id,
    orgId: 'org_1',
    machine: 'm',
    createdAt: new Date().toISOString(),
    clientInfo: 'test',
    indexSelectors: {},
  });

  await a.catalog.createOrg({ id: 'org_1', name: 'one', createdAt: new Date().toISOString(), allowAnonymousAccess: true });
  await a.catalog.createMachine({ orgId: 'org_1', slug: 'm', createdAt: new Date().toISOString(), indexes: [] });

  // ≈ 3 MB, above JetStream's 1 MB message limit, with multi-byte characters across chunk boundaries.
  const big = `export default { id: 'm' };\n/* ${'é€𝄞x'.repeat(330_000)} */\n`;
  t.ok(Buffer.byteLength(big) > 3_000_000);
  const expiresAt = Date.now() + 60_000;
  await a.versions.putPendingUpload({ orgId: 'org_1', machine: 'm', versionId: 'ver_1', code: big, expiresAt });
  t.equal(a.versions.getPendingUpload('org_1', 'ver_1')?.code, big, 'the submitter reads its own upload');
  await b.log.catchUp();
  t.same(
    b.versions.getPendingUpload('org_1', 'ver_1'),
    { orgId: 'org_1', machine: 'm', versionId: 'ver_1', code: big, expiresAt },
    'the 3 MB upload made on a is on b',
  );

  const first = record('ver_1');
  const upload = b.versions.getPendingUpload('org_1', 'ver_1');
  t.same(await b.versions.finalizeVersion(first, upload?.code ?? '', true), { kind: 'created', record: first }, 'finalized on b: created');
  t.equal(b.versions.getPendingUpload('org_1', 'ver_1'), undefined, 'the pending upload is gone on b');
  await a.log.catchUp();
  t.same(a.versions.getVersion('org_1', 'm', 'ver_1'), first, 'a reads the version finalized on b');
  t.equal(a.versions.getVersionCode('org_1', 'ver_1'), big, 'with its exact code');
  t.equal(a.catalog.getMachine('org_1', 'm')?.currentVersionId, 'ver_1', 'makeCurrent moved the pointer on a too');
  t.equal(a.versions.getPendingUpload('org_1', 'ver_1'), undefined, 'and the pending upload is gone on a');
  t.equal((await objects()).filter((name) => name.startsWith('pending/')).length, 0, 'the finalizer deleted the pending object');

  t.same(
    await a.versions.finalizeVersion(record('ver_1'), big, false),
    { kind: 'existing', record: first },
    'a repeated finalize: existing, the first record',
  );
  t.equal(
    (await objects()).filter((name) => name.startsWith('version/org_1/ver_1/')).length,
    1,
    'the repeat (same bytes) shares the object and kept it',
  );

  // Racing finalizes of one id with different bytes: one created, the other existing; both nodes hold the winner's code.
  const [fromA, fromB] = await Promise.all([
    a.versions.finalizeVersion(record('ver_2'), 'export default "a";', false),
    b.versions.finalizeVersion(record('ver_2'), 'export default "b";', false),
  ]);
  t.same([fromA.kind, fromB.kind].sort(), ['created', 'existing'], 'one created, one existing');
  await a.log.catchUp();
  await b.log.catchUp();
  const winner = fromA.kind === 'created' ? 'export default "a";' : 'export default "b";';
  t.equal(a.versions.getVersionCode('org_1', 'ver_2'), winner, "a holds the winner's code");
  t.equal(b.versions.getVersionCode('org_1', 'ver_2'), winner, "b holds the winner's code");
  t.equal(
    (await objects()).filter((name) => name.startsWith('version/org_1/ver_2/')).length,
    1,
    "the loser deleted its object, the winner's stays",
  );

  // Racing repeats with the same bytes (a retried PUT on two nodes).
  const same = await Promise.all([
    a.versions.finalizeVersion(record('ver_3'), 'export default 3;', false),
    b.versions.finalizeVersion(record('ver_3'), 'export default 3;', false),
  ]);
  t.same(same.map((r) => r.kind).sort(), ['created', 'existing']);
  await a.log.catchUp();
  t.equal(a.versions.getVersionCode('org_1', 'ver_3'), 'export default 3;');
  t.equal((await objects()).filter((name) => name.startsWith('version/org_1/ver_3/')).length, 1, 'the shared object stays');

  await b.log.catchUp();
  const listed = a.versions.listVersions('org_1', 'm', undefined, 10);
  t.same(listed.map((v) => v.id).sort(), ['ver_1', 'ver_2', 'ver_3']);
  t.same(b.versions.listVersions('org_1', 'm', undefined, 10), listed, 'listVersions agree');

  // Sweeping: an expired upload goes on both nodes, with its object; a live one stays.
  const now = Date.now();
  await a.versions.putPendingUpload({ orgId: 'org_1', machine: 'm', versionId: 'ver_old', code: 'old', expiresAt: now - 1000 });
  await b.versions.putPendingUpload({ orgId: 'org_1', machine: 'm', versionId: 'ver_live', code: 'live', expiresAt: now + 60_000 });
  t.equal(await b.versions.sweepExpiredPendingUploads(now), 1, 'one swept');
  await a.log.catchUp();
  for (const [name, n] of [
    ['a', a],
    ['b', b],
  ] as const) {
    t.equal(n.versions.getPendingUpload('org_1', 'ver_old'), undefined, `the expired upload is gone on ${name}`);
    t.equal(n.versions.getPendingUpload('org_1', 'ver_live')?.code, 'live', `the live upload stays on ${name}`);
  }
  t.same(
    (await objects()).filter((name) => name.startsWith('pending/')),
    ['pending/org_1/ver_live'],
    'the swept object is deleted, the live one kept',
  );

  // Deleting the machine's versions on a: gone on both, with their code objects and pending uploads.
  t.same((await a.versions.deleteMachineVersions('org_1', 'm')).sort(), ['ver_1', 'ver_2', 'ver_3'], 'the removed ids');
  await b.log.catchUp();
  for (const [name, n] of [
    ['a', a],
    ['b', b],
  ] as const) {
    t.same(n.versions.listVersions('org_1', 'm', undefined, 10), [], `no versions left on ${name}`);
    t.equal(n.versions.getVersionCode('org_1', 'ver_1'), undefined, `no code left on ${name}`);
    t.equal(n.versions.getPendingUpload('org_1', 'ver_live'), undefined, `no pending upload left on ${name}`);
  }
  t.same(await objects(), [], 'the bucket is empty');

  // A third node replays the whole log after the objects are gone: it reaches the same state.
  const c = await node('c');
  await c.log.catchUp();
  t.same(c.versions.listVersions('org_1', 'm', undefined, 10), []);
  t.equal(c.versions.getPendingUpload('org_1', 'ver_live'), undefined);
  t.equal(c.versions.getPendingUpload('org_1', 'ver_old'), undefined);
  t.same(
    c.catalog.getMachine('org_1', 'm'),
    a.catalog.getMachine('org_1', 'm'),
    'the machine record (and its current version pointer) agrees',
  );

  // Writes after the replay land everywhere again.
  await c.versions.finalizeVersion(record('ver_4'), 'export default 4;', false);
  await a.log.catchUp();
  t.equal(a.versions.getVersionCode('org_1', 'ver_4'), 'export default 4;', 'a version finalized on the replayed node reaches a');

  // A machine's first version becomes current without makeCurrent, on every node (decided in apply).
  await c.catalog.createMachine({ orgId: 'org_1', slug: 'first', createdAt: new Date().toISOString(), indexes: [] });
  await c.versions.finalizeVersion({ ...record('ver_f1'), machine: 'first' }, 'export default "f1";', false);
  await c.versions.finalizeVersion({ ...record('ver_f2'), machine: 'first' }, 'export default "f2";', false);
  await a.log.catchUp();
  for (const [name, n] of [
    ['a', a],
    ['c', c],
  ] as const) {
    t.equal(
      n.catalog.getMachine('org_1', 'first')?.currentVersionId,
      'ver_f1',
      `the first version is current on ${name}; the second, without makeCurrent, not`,
    );
  }
});
