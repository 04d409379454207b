import { randomBytes } from 'node:crypto';
import { signToken } from '@statebacked/token';
import t from 'tap';
import { UploadSigner } from '../src/auth/upload-signer.js';
import type { MachineVersionRecord } from '../src/domain/records.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { TOGGLE } from './fixtures/machines.js';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { removeDir, startNode, tempDataDir } from './helpers/node-process.js';
import { tempNodeStore } from './helpers/temp-store.js';

t.test('upload signer: URL-safe, bound to its key and claims, expiring', async (t) => {
  const masterKey = randomBytes(32);
  const signer = new UploadSigner(masterKey, 3600);
  const claims = { kind: 'version' as const, orgId: 'org_a', machine: 'm-1', id: 'ver_x', gzip: true };
  const now = Date.UTC(2030, 0, 1);
  const token = signer.sign(claims, now);
  t.match(token, /^[A-Za-z0-9_.-]+$/, 'URL-safe');
  t.same(signer.verify(token, now), { ok: true, claims: { ...claims, expiresAt: now / 1000 + 3600 } });
  t.match(signer.verify(token, now + 3600 * 1000), { ok: false, reason: 'expired', claims: { id: 'ver_x' } }, 'expired at its expiry');
  t.equal(signer.verify(signer.sign({ ...claims, expiresAt: now / 1000 - 1 }, now), now).ok, false, 'an explicit past expiry');
  t.match(new UploadSigner(randomBytes(32), 3600).verify(token, now), { ok: false, reason: 'bad-signature' }, 'another master key');
  t.match(new UploadSigner(masterKey, 60).verify(token, now), { ok: true }, 'the TTL is not part of the key');
  const [tag, payload, mac] = token.split('.') as [string, string, string];
  t.match(signer.verify(`${tag}.${payload}x.${mac}`, now), { ok: false, reason: 'bad-signature' });
  t.match(signer.verify(`u2.${payload}.${mac}`, now), { ok: false, reason: 'malformed' });
  t.match(signer.verify(`${tag}.${payload}`, now), { ok: false, reason: 'malformed' });
  t.match(signer.verify(`${tag}.${payload}.${mac}=`, now), { ok: false, reason: 'bad-signature' });
  // A MAC's 43rd character carries 2 unused bits: a text that differs only there is still refused.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(mac.at(-1) as string);
  t.equal(last % 4, 0, 'the canonical text leaves them zero');
  const sameBytes = `${mac.slice(0, -1)}${alphabet[last + 1]}`;
  t.same(Buffer.from(sameBytes, 'base64url'), Buffer.from(mac, 'base64url'), 'a lenient decoder reads the same MAC');
  t.match(signer.verify(`${tag}.${payload}.${sameBytes}`, now), { ok: false, reason: 'bad-signature' });
  t.match(signer.verify('', now), { ok: false, reason: 'malformed' });
  t.equal(
    signer.verify(signer.sign({ ...claims, kind: 'version-upload', gzip: false }, now), now).ok && 'version-upload',
    'version-upload',
  );
});

t.test('LMDB version store', async (t) => {
  const store = tempNodeStore(t);
  const { catalog, versions } = store;
  await catalog.createMachine({ orgId: 'org_a', slug: 'm', createdAt: '2024-01-01T00:00:00.000Z', indexes: [] });
  await catalog.createMachine({ orgId: 'org_b', slug: 'm', createdAt: '2024-01-01T00:00:00.000Z', indexes: [] });
  const record = (id: string, createdAt: string, orgId = 'org_a'): MachineVersionRecord => ({
    id,
    orgId,
    machine: 'm',
    createdAt,
    clientInfo: id,
    indexSelectors: {},
  });

  await versions.putPendingUpload({ orgId: 'org_a', machine: 'm', versionId: 'ver_1', code: 'one', expiresAt: 1000 });
  await versions.putPendingUpload({ orgId: 'org_a', machine: 'm', versionId: 'ver_1', code: 'two', expiresAt: 5000 });
  t.match(versions.getPendingUpload('org_a', 'ver_1'), { code: 'two', expiresAt: 5000, machine: 'm' }, 'a re-upload replaces');
  t.equal(versions.getPendingUpload('org_b', 'ver_1'), undefined, 'namespaced by org');
  t.equal(await versions.sweepExpiredPendingUploads(2000), 0, 'the stale expiry entry of the first upload is gone');
  t.equal(await versions.sweepExpiredPendingUploads(6000), 1);
  t.equal(versions.getPendingUpload('org_a', 'ver_1'), undefined, 'swept');

  await versions.putPendingUpload({ orgId: 'org_a', machine: 'm', versionId: 'ver_1', code: 'code 1', expiresAt: Date.now() + 60_000 });
  const created = await versions.finalizeVersion(record('ver_1', '2024-01-01T00:00:01.000Z'), 'code 1', true);
  t.equal(created.kind, 'created');
  t.equal(versions.getPendingUpload('org_a', 'ver_1'), undefined, 'finalization drops the pending upload');
  t.equal(catalog.getMachine('org_a', 'm')?.currentVersionId, 'ver_1');
  t.equal(versions.getVersionCode('org_a', 'ver_1'), 'code 1');
  t.equal(versions.getVersionCode('org_b', 'ver_1'), undefined);
  t.match(versions.getVersion('org_a', 'm', 'ver_1'), { id: 'ver_1', clientInfo: 'ver_1' });
  t.equal(versions.getVersion('org_a', 'other', 'ver_1'), undefined, 'only under its machine');
  t.equal(versions.getVersion('org_b', 'm', 'ver_1'), undefined, 'only in its org');
  const repeated = await versions.finalizeVersion(
    { ...record('ver_1', '2024-02-01T00:00:00.000Z'), clientInfo: 'changed' },
    'code changed',
    false,
  );
  t.match(repeated, { kind: 'existing', record: { clientInfo: 'ver_1' } });
  t.equal(versions.getVersionCode('org_a', 'ver_1'), 'code 1', 'a repeated finalize writes nothing');
  t.same(await versions.finalizeVersion({ ...record('ver_z', '2024-01-01T00:00:00.000Z'), machine: 'gone' }, 'x', true), {
    kind: 'no-machine',
  });

  for (let i = 2; i <= 5; i++) await versions.finalizeVersion(record(`ver_${i}`, `2024-01-01T00:00:0${i}.000Z`), `code ${i}`, false);
  await versions.finalizeVersion(record('ver_same_a', '2024-01-01T00:00:09.000Z'), 'a', false);
  await versions.finalizeVersion(record('ver_same_b', '2024-01-01T00:00:09.000Z'), 'b', false);
  await versions.finalizeVersion(record('ver_b1', '2024-01-01T00:00:01.000Z', 'org_b'), 'b1', false);
  t.equal(catalog.getMachine('org_a', 'm')?.currentVersionId, 'ver_1', 'makeCurrent false leaves the pointer');
  t.equal(catalog.getMachine('org_b', 'm')?.currentVersionId, 'ver_b1', 'a first version becomes current without makeCurrent');
  const seen: string[] = [];
  let after: { createdAt: string; id: string } | undefined;
  for (;;) {
    const page = versions.listVersions('org_a', 'm', after, 3);
    seen.push(...page.map((v) => v.id));
    if (page.length < 3) break;
    const last = page.at(-1) as MachineVersionRecord;
    after = { createdAt: last.createdAt, id: last.id };
  }
  t.same(seen, ['ver_same_b', 'ver_same_a', 'ver_5', 'ver_4', 'ver_3', 'ver_2', 'ver_1'], 'newest first, ties by id, stable cursors');
  t.same(
    versions.listVersions('org_b', 'm', undefined, 10).map((v) => v.id),
    ['ver_b1'],
  );

  await versions.putPendingUpload({ orgId: 'org_a', machine: 'm', versionId: 'ver_p', code: 'p', expiresAt: Date.now() + 60_000 });
  const removed = await versions.deleteMachineVersions('org_a', 'm');
  t.same(
    [...removed].sort(),
    ['ver_1', 'ver_2', 'ver_3', 'ver_4', 'ver_5', 'ver_same_a', 'ver_same_b'],
    'it names the versions it removed',
  );
  t.same(versions.listVersions('org_a', 'm', undefined, 10), []);
  t.equal(versions.getVersionCode('org_a', 'ver_3'), undefined);
  t.equal(versions.getPendingUpload('org_a', 'ver_p'), undefined);
  t.same(
    versions.listVersions('org_b', 'm', undefined, 10).map((v) => v.id),
    ['ver_b1'],
    'the other org keeps its versions',
  );
});

t.test('expiry and selector defaulting against a node with a 2 s upload TTL', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const node = await startNode({ dataDir, env: { STATEHOLD_UPLOAD_TTL_SECONDS: '2' } });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : node.stop()));
  const key = await call(node.url, 'POST', '/keys', { token: node.adminKey, body: { name: 'ci', use: 'ci' } });
  const token = await signToken(
    { stateBackedKeyId: key.body.id, stateBackedSecretKey: key.body.key },
    { sub: 'ci' },
    { expires: { in: '1h' } },
  );
  t.equal(
    (await call(node.url, 'POST', '/machines', { token, body: { slug: 'indexed', indexes: ['email', 'score', 'name'] } })).status,
    201,
  );

  const provisional = async () => (await call(node.url, 'POST', '/machines/indexed/v', { token })).body;
  const upload = async (p: { codeUploadUrl: string; codeUploadFields: Record<string, string> }) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(p.codeUploadFields)) form.append(k, v);
    form.append('file', new Blob([TOGGLE]), 'indexed.js');
    const response = await fetch(p.codeUploadUrl, { method: 'POST', body: form });
    return { status: response.status, body: await response.json().catch(() => undefined) };
  };
  const finalize = (signedId: string, body: unknown) => call(node.url, 'PUT', `/machines/indexed/v/${signedId}`, { token, body });

  const late = await provisional();
  const lateUploadOnly = await provisional();
  const early = await provisional();
  t.equal((await upload(late)).status, 204, 'uploaded in time');
  t.equal((await upload(early)).status, 204);
  const earlyDone = await finalize(early.machineVersionId, { makeCurrent: true, indexSelectors: { email: '$.email', score: '$.score' } });
  t.equal(earlyDone.status, 200);

  // Wait for the TTL to pass (a token expires 1–2 s after it is signed, in whole seconds): a provisional
  // version asked after the others is uploaded again and again until it is refused as expired.
  const probe = await provisional();
  await eventually(async () => (await upload(probe)).status === 403, { intervalMs: 100, message: 'the upload TTL did not pass' }).catch(
    () => undefined,
  );
  const expiredFinalize = await finalize(late.machineVersionId, {});
  t.equal(expiredFinalize.status, 403);
  t.match(expiredFinalize.body, { code: 'unauthorized', error: /expired/ });
  const expiredUpload = await upload(lateUploadOnly);
  t.equal(expiredUpload.status, 403);
  t.match(expiredUpload.body, { code: 'unauthorized', error: /expired/ });
  t.same((await finalize(early.machineVersionId, {})).body, earlyDone.body, 'a finalized version answers a repeat even after expiry');

  const next = await provisional();
  t.equal((await upload(next)).status, 204);
  const nextDone = await finalize(next.machineVersionId, { indexSelectors: { score: '$.public.score', name: '$.name' } });
  t.equal(nextDone.status, 200);

  t.equal(await node.stop(), 0);
  stopped = true;
  const store = openLmdbNodeStore(dataDir);
  t.teardown(() => store.close());
  const orgId = store.catalog.listOrgs()[0]?.id as string;
  const first = store.versions.getVersion(orgId, 'indexed', earlyDone.body.machineVersionId);
  t.match(first, { machine: 'indexed', clientInfo: '', indexSelectors: { email: '$.email', score: '$.score' } });
  t.same(
    store.versions.getVersion(orgId, 'indexed', nextDone.body.machineVersionId)?.indexSelectors,
    { email: '$.email', score: '$.public.score', name: '$.name' },
    'selectors left out come from the current version',
  );
  t.equal(store.versions.getVersionCode(orgId, nextDone.body.machineVersionId), TOGGLE, 'the code is stored as uploaded');
  t.equal(store.catalog.getMachine(orgId, 'indexed')?.currentVersionId, earlyDone.body.machineVersionId);
});
