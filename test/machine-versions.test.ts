import { gzipSync } from 'node:zlib';
import { errors, StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import t from 'tap';
import { INVALID_BUNDLES, NESTED_PARALLEL, TOGGLE } from './fixtures/machines.js';
import { call, rawExchange } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--page-size', '2'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

const keyFor = async (scopes: string[]) => {
  const created = await call(node.url, 'POST', '/keys', { token: admin, body: { name: 'k', scopes } });
  if (created.status !== 200) throw new Error(created.text);
  return signToken({ stateBackedKeyId: created.body.id, stateBackedSecretKey: created.body.key }, { sub: 'ci' }, { expires: { in: '1h' } });
};
const writer = await keyFor(['machines.read', 'machines.write', 'machines.admin', 'machine-versions.read', 'machine-versions.write']);
const versionReader = await keyFor(['machines.read', 'machine-versions.read']);
const machinesOnly = await keyFor(['machines.read', 'machines.write']);
const client = new StateBackedClient(writer, { apiHost: node.url });

interface Provisional {
  machineVersionId: string;
  codeUploadUrl: string;
  codeUploadFields: Record<string, string>;
}

/** The client's `uploadCode`, by hand: fields, then content-type, then content-encoding, then the file. */
const upload = async (
  provisional: Pick<Provisional, 'codeUploadUrl' | 'codeUploadFields'>,
  code: string | Uint8Array,
  options: { gzip?: boolean; fields?: Record<string, string>; fileField?: string } = {},
) => {
  const form = new FormData();
  for (const [key, value] of Object.entries(options.fields ?? provisional.codeUploadFields)) form.append(key, value);
  form.set('content-type', 'application/javascript');
  if (options.gzip) form.set('content-encoding', 'gzip');
  form.append(options.fileField ?? 'file', new Blob([code], { type: 'application/javascript' }), 'machine.js');
  const response = await fetch(provisional.codeUploadUrl, { method: 'POST', body: form });
  const text = await response.text();
  return { status: response.status, text, body: text ? JSON.parse(text) : undefined };
};

const provisional = async (machine: string, query = ''): Promise<Provisional> => {
  const res = await call(node.url, 'POST', `/machines/${machine}/v${query}`, {
    token: writer,
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new Error(res.text);
  return res.body;
};

const finalize = (machine: string, signedId: string, body: unknown = {}) =>
  call(node.url, 'PUT', `/machines/${machine}/v/${signedId}`, { token: writer, body });

const listAll = async (machine: string) => {
  const ids: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await client.machineVersions.list(machine, cursor ? { cursor } : undefined);
    ids.push(...page.versions.map((v) => v.id));
    cursor = page.cursor;
    pages++;
  } while (cursor && pages < 20);
  return { ids, pages };
};

t.test('the real client creates versions from code and gzipped code; machines show the current one', async (t) => {
  await client.machines.create('toggle');
  const v1 = await client.machineVersions.create('toggle', { clientInfo: 'v1', makeCurrent: true, code: TOGGLE });
  t.match(v1, { machineVersionId: /^ver_[A-Za-z0-9_-]{22}$/ });
  const got = await client.machines.get('toggle');
  t.match(got.machine, {
    createdAt: String,
    currentVersion: { id: v1.machineVersionId, clientInfo: 'v1', createdAt: String },
    indexes: [],
  });
  t.ok(!Number.isNaN(Date.parse(got.machine.currentVersion?.createdAt ?? '')), 'createdAt is a date');

  const v2 = await client.machineVersions.create('toggle', { clientInfo: 'v2 gzipped', makeCurrent: false, gzippedCode: gzipSync(TOGGLE) });
  t.not(v2.machineVersionId, v1.machineVersionId);
  t.equal(
    (await client.machines.get('toggle')).machine.currentVersion?.id,
    v1.machineVersionId,
    'makeCurrent: false leaves the current version',
  );

  const v3 = await client.machineVersions.create('toggle', { makeCurrent: true, gzippedCode: gzipSync(NESTED_PARALLEL) } as any);
  const current = (await client.machines.get('toggle')).machine.currentVersion;
  t.same(
    current && { id: current.id, clientInfo: current.clientInfo },
    { id: v3.machineVersionId, clientInfo: '' },
    'clientInfo defaults to ""',
  );

  const listed = await client.machines.list();
  t.match(
    listed.machines.find((m) => m.slug === 'toggle'),
    { slug: 'toggle', currentVersion: { id: v3.machineVersionId, clientInfo: '' } },
  );

  const firstPage = await client.machineVersions.list('toggle');
  t.equal(firstPage.versions.length, 2, 'page size 2');
  t.match(firstPage.cursor, /^[A-Za-z0-9_-]+$/, 'cursor is URL-safe');
  t.match(firstPage.versions[0], { id: v3.machineVersionId, createdAt: String, clientInfo: '' });
  const all = await listAll('toggle');
  t.same(all.ids, [v3.machineVersionId, v2.machineVersionId, v1.machineVersionId], 'newest first, each once');
  t.equal(all.pages, 2);

  await client.machines.create('fresh');
  t.notOk('currentVersion' in (await client.machines.get('fresh')).machine, 'no version, no currentVersion');
  const first = await client.machineVersions.create('fresh', { clientInfo: 'first', code: TOGGLE });
  t.equal(
    (await client.machines.get('fresh')).machine.currentVersion?.id,
    first.machineVersionId,
    'a first version is current even without makeCurrent',
  );
  const instance = await call(node.url, 'POST', '/machines/fresh', { token: admin, body: { slug: 'one' } });
  t.equal(instance.status, 200, `so an instance can be created: ${instance.text}`);
  t.equal(instance.body?.state, 'off');
  await client.machineVersions.create('fresh', { clientInfo: 'second', code: TOGGLE });
  t.equal(
    (await client.machines.get('fresh')).machine.currentVersion?.id,
    first.machineVersionId,
    'a later one without makeCurrent leaves it',
  );
  t.same(
    (await client.machineVersions.list('fresh')).versions.map((v) => v.clientInfo),
    ['second', 'first'],
  );
});

t.test('provisional creation, manual upload, finalize: URL-safe ids, re-upload, idempotent finalize', async (t) => {
  await client.machines.create('manual');
  const p = (await client.machineVersions.provisionallyCreate('manual')) as Provisional; // (the client types each field as possibly undefined)
  t.match(p.machineVersionId, /^[A-Za-z0-9._~-]+$/, 'the signed id is URL-safe');
  t.ok(p.codeUploadUrl.startsWith(`${node.url}/uploads/`), p.codeUploadUrl);
  t.same(Object.keys(p.codeUploadFields), ['token']);

  t.equal((await upload(p, INVALID_BUNDLES.missingAllowRead.code)).status, 204);
  t.equal((await upload(p, TOGGLE)).status, 204, 're-uploading before finalization replaces the code');
  const done = await client.machineVersions.finalize('manual', p.machineVersionId, { clientInfo: 'manual', makeCurrent: true });
  t.match(done, { machineVersionId: /^ver_/ });
  const again = await client.machineVersions.finalize('manual', p.machineVersionId, { clientInfo: 'other', makeCurrent: true });
  t.same(again, done, 'finalizing twice answers the same id');
  const versions = (await client.machineVersions.list('manual')).versions;
  t.same(
    versions.map((v) => [v.id, v.clientInfo]),
    [[done.machineVersionId, 'manual']],
    'one version, the first finalize kept',
  );
  const late = await upload(p, TOGGLE);
  t.equal(late.status, 409, 'an upload after finalization is refused: the version keeps its code');
  t.match(late.body, { code: 'invalid-state', error: /already finalized/ });
  t.same(await client.machineVersions.finalize('manual', p.machineVersionId, {}), done, 'and the version is as it was');

  for (const query of ['?gzip', '?gzip=true', '?gzip=1']) {
    const gz = await provisional('manual', query);
    // The signed gzip flag alone makes the upload gunzip: no content-encoding field here.
    t.equal((await upload(gz, gzipSync(TOGGLE))).status, 204, query);
    const res = await finalize('manual', gz.machineVersionId, { clientInfo: query });
    t.equal(res.status, 200, query);
    t.match(res.body, { machineVersionId: /^ver_/ });
  }
  const plain = await provisional('manual', '?gzip=false');
  t.equal((await upload(plain, gzipSync(TOGGLE), { gzip: true })).status, 204, 'content-encoding: gzip alone also gunzips');
  t.equal((await finalize('manual', plain.machineVersionId)).status, 200);
  t.equal((await call(node.url, 'POST', '/machines/manual/v?gzip=maybe', { token: writer })).body.parameter, 'gzip');

  const big = `${TOGGLE}\n/*${' '.repeat(2_000_000)}*/\n`;
  const bigP = await provisional('manual', '?gzip');
  t.equal((await upload(bigP, gzipSync(big), { gzip: true })).status, 204, 'over 1 MB uncompressed is fine when gzipped under 1 MB');
  t.equal((await finalize('manual', bigP.machineVersionId)).status, 200);
});

t.test('invalid bundles are refused at finalization with what is wrong', async (t) => {
  await client.machines.create('invalid');
  for (const [name, { code, message }] of Object.entries(INVALID_BUNDLES)) {
    const error = await client.machineVersions.create('invalid', { clientInfo: name, makeCurrent: true, code }).catch((e: unknown) => e);
    t.type(error, errors.ClientError, name);
    t.match((error as Error).message, message, name);
    const p = await provisional('invalid');
    await upload(p, code);
    const res = await finalize('invalid', p.machineVersionId);
    t.equal(res.status, 400, name);
    t.same(res.body, { error: res.body.error, code: 'invalid-parameter', parameter: 'code' }, name);
  }
  const syntax = await client.machineVersions.create('invalid', { code: INVALID_BUNDLES.syntaxError.code }).catch((e: Error) => e.message);
  t.match(syntax, /SyntaxError at line 4/, 'the syntax error names its line');
  t.same((await client.machineVersions.list('invalid')).versions, [], 'nothing was stored');
  t.notOk('currentVersion' in (await client.machines.get('invalid')).machine);

  const notUtf8 = await provisional('invalid');
  const res = await upload(notUtf8, new Uint8Array([0xff, 0xfe, 0x00]));
  t.equal(res.status, 400);
  t.equal(res.body.parameter, 'file');
  const notGzip = await provisional('invalid', '?gzip');
  const bad = await upload(notGzip, TOGGLE, { gzip: true });
  t.equal(bad.status, 400);
  t.match(bad.body.error, /not valid gzip/);
});

t.test('finalize without an upload', async (t) => {
  await client.machines.create('noupload');
  const p = await provisional('noupload');
  const res = await finalize('noupload', p.machineVersionId, { makeCurrent: true });
  t.equal(res.status, 400);
  t.match(res.body, { code: 'invalid-parameter', parameter: 'signedMachineVersionId', error: /no code was uploaded/ });
  await t.rejects(client.machineVersions.finalize('noupload', p.machineVersionId, {}), errors.ClientError);
});

t.test('forged, tampered and misplaced signed ids and upload tokens', async (t) => {
  await client.machines.create('forge');
  await client.machines.create('other-machine');
  const p = await provisional('forge');
  t.equal((await upload(p, TOGGLE)).status, 204);
  const [tag, payload, mac] = p.machineVersionId.split('.') as [string, string, string];

  const flipped = `${tag}.${payload}.${mac.slice(0, -2)}${mac.endsWith('AA') ? 'BB' : 'AA'}`;
  const forged = await finalize('forge', flipped);
  t.equal(forged.status, 403);
  t.match(forged.body, { code: 'unauthorized', error: /not one this service signed/ });
  t.equal((await finalize('forge', 'not-a-signed-id')).status, 403, 'garbage is refused');

  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  const rewritten = Buffer.from(JSON.stringify([claims[0], claims[1], 'other-machine', ...claims.slice(3)])).toString('base64url');
  t.equal((await finalize('other-machine', `${tag}.${rewritten}.${mac}`)).status, 403, 'a rewritten payload fails the signature');
  const extended = Buffer.from(JSON.stringify([...claims.slice(0, 5), claims[5] + 86400])).toString('base64url');
  t.equal((await finalize('forge', `${tag}.${extended}.${mac}`)).status, 403, 'an extended expiry fails the signature');

  const wrongMachine = await finalize('other-machine', p.machineVersionId);
  t.equal(wrongMachine.status, 400, 'a genuine id under another machine');
  t.match(wrongMachine.body, { code: 'invalid-parameter', parameter: 'signedMachineVersionId', error: /another machine/ });

  const uploadToken = p.codeUploadFields.token as string;
  t.equal((await finalize('forge', uploadToken)).body.parameter, 'signedMachineVersionId', 'an upload token is not a version id');

  const otherOrg = await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'second' } });
  const headers = { 'x-statebacked-org-id': otherOrg.body.id };
  t.equal((await call(node.url, 'POST', '/machines', { token: admin, headers, body: { slug: 'forge' } })).status, 201);
  const crossOrg = await call(node.url, 'PUT', `/machines/forge/v/${p.machineVersionId}`, { token: admin, headers, body: {} });
  t.equal(crossOrg.status, 400, 'a genuine id used in another org');
  t.equal(crossOrg.body.parameter, 'signedMachineVersionId');

  // Upload side.
  const tamperedToken = await upload(p, TOGGLE, {
    fields: { token: `${uploadToken.slice(0, -1)}${uploadToken.endsWith('A') ? 'B' : 'A'}` },
  });
  t.equal(tamperedToken.status, 403);
  t.match(tamperedToken.body, { code: 'unauthorized', error: /codeUploadFields/ });
  const missingToken = await upload(p, TOGGLE, { fields: {} });
  t.equal(missingToken.status, 400);
  t.equal(missingToken.body.parameter, 'token');
  const versionIdAsToken = await upload(p, TOGGLE, { fields: { token: p.machineVersionId } });
  t.equal(versionIdAsToken.status, 400, 'the signed version id is not an upload token');
  t.equal(versionIdAsToken.body.parameter, 'token');
  const noFile = await upload(p, TOGGLE, { fileField: 'code' });
  t.equal(noFile.status, 400);
  t.equal(noFile.body.parameter, 'file');
  const notMultipart = await call(node.url, 'POST', '/uploads/code', { body: { token: uploadToken } });
  t.equal(notMultipart.status, 400);
  t.match(notMultipart.body.error, /multipart/);

  t.match(await finalize('forge', p.machineVersionId), { status: 200, body: { machineVersionId: /^ver_/ } }, 'the genuine id still works');
});

t.test('size limits: 1,000,000 bytes uploaded, 10,000,000 gunzipped', async (t) => {
  await client.machines.create('sizes');
  const p = await provisional('sizes');
  const tooBig = await upload(p, `${TOGGLE}/*${'x'.repeat(1_000_001)}*/`);
  t.equal(tooBig.status, 413);
  t.match(tooBig.body, { code: 'payload-too-large', error: /1000000 bytes/ });
  t.equal((await upload(p, 'x'.repeat(1_000_000))).status, 204, 'exactly 1,000,000 bytes is allowed');

  const gz = await provisional('sizes', '?gzip');
  const bomb = gzipSync(Buffer.alloc(10_000_001, 0x20));
  t.ok(bomb.length < 1_000_000, 'the bomb itself is small');
  const exploded = await upload(gz, bomb, { gzip: true });
  t.equal(exploded.status, 413);
  t.match(exploded.body, { code: 'payload-too-large', error: /10000000 bytes once gunzipped/ });
  t.equal((await upload(gz, gzipSync(Buffer.alloc(10_000_000, 0x20)), { gzip: true })).status, 204, 'exactly 10,000,000 bytes is allowed');

  const viaClient = await client.machineVersions
    .create('sizes', { code: `${TOGGLE}/*${'x'.repeat(1_000_001)}*/` })
    .catch((e: unknown) => e);
  t.type(viaClient, errors.ApiError);
  t.equal((viaClient as errors.ApiError).status, 413, 'the client reports the upload status');

  // The upload takes no credential (its token is in the form): a body past what any upload form can be
  // is refused from its Content-Length, before the node reads it (here it is never sent).
  const port = node.nodes?.[0]?.port ?? node.port;
  const announced = (head: string) => rawExchange(port, head);
  const form = 'x'.repeat(2_000_000);
  const answer = await announced(
    `POST /uploads/code HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=b\r\ncontent-length: ${form.length}\r\n\r\n${form}`,
  );
  t.match(answer, /^HTTP\/1\.1 413 [^]*at most 1327680 bytes/, 'a 2 MB upload form: 413 from its length, the body thrown away');
  const stray = 'x'.repeat(100_000);
  t.match(
    await announced(`GET /health HTTP/1.1\r\nhost: x\r\ncontent-length: ${stray.length}\r\n\r\n${stray}`),
    /^HTTP\/1\.1 413 [^]*at most 4096 bytes/,
    'a route anyone may call and that takes no body takes a stray one of 4 KiB at most',
  );
});

t.test("an org's uploads not finalized yet are bounded, in number and in code", async (t) => {
  // Before: nothing bounded them, and each is kept for an hour: 20 uploads of 10 KB of gzip made the
  // node's LMDB file grow by 200 MB (10 MB of code each), and a few MB of requests could fill its disk.
  const writerOfNewOrg = async (name: string) => {
    const org = await call(node.url, 'POST', '/orgs', { token: admin, body: { name } });
    const headers = { 'x-statebacked-org-id': org.body.id as string };
    const key = await call(node.url, 'POST', '/keys', { token: admin, headers, body: { name: 'k', use: 'ci' } });
    const token = await signToken(
      { stateBackedKeyId: key.body.id, stateBackedSecretKey: key.body.key },
      { sub: 'ci' },
      { expires: { in: '1h' } },
    );
    const created = await call(node.url, 'POST', '/machines', { token: admin, headers, body: { slug: 'm' } });
    t.equal(created.status, 201, created.text);
    const provisionalOfNewOrg = async () => (await call(node.url, 'POST', '/machines/m/v?gzip', { token })).body as Provisional;
    return Object.assign(provisionalOfNewOrg, { token });
  };
  const byCount = await writerOfNewOrg('pending-count');
  const first = await byCount();
  t.equal((await upload(first, gzipSync(INVALID_BUNDLES.missingAllowRead.code))).status, 204);
  let accepted = 1;
  for (let i = 1; i < 100; i++) if ((await upload(await byCount(), gzipSync(`/* ${i} */`))).status === 204) accepted++;
  t.equal(accepted, 100, 'a hundred are taken');
  const refused = await upload(await byCount(), gzipSync('/* 101 */'));
  t.equal(refused.status, 429, 'the 101st is refused');
  t.match(refused.body, { code: 'rate-limited', error: /holds 100 uploaded bundles not finalized yet.*finalize them/ });
  t.equal((await upload(first, gzipSync(TOGGLE))).status, 204, 'a re-upload for a version already uploaded replaces it');
  t.equal((await upload(await byCount(), gzipSync('/* 101 */'))).status, 429, 'still full');
  const finalized = await call(node.url, 'PUT', `/machines/m/v/${first.machineVersionId}`, { token: byCount.token, body: {} });
  t.equal(finalized.status, 200, finalized.text);
  t.equal((await upload(await byCount(), gzipSync('/* 101 */'))).status, 204, 'a finalized upload makes room');

  const byBytes = await writerOfNewOrg('pending-bytes');
  const tenMb = gzipSync(Buffer.alloc(10_000_000, 0x20));
  for (let i = 0; i < 5; i++) t.equal((await upload(await byBytes(), tenMb, { gzip: true })).status, 204, `10 MB of code, ${i + 1}`);
  const tooMuch = await upload(await byBytes(), gzipSync('/* small */'), { gzip: true });
  t.equal(tooMuch.status, 429, 'past 50,000,000 characters of code, even a small one is refused');
  t.match(tooMuch.body, { code: 'rate-limited', error: /holds 5 uploaded bundles not finalized yet \(50000000 characters of code\)/ });
  const ofFirstOrg = await byCount();
  t.equal((await upload(ofFirstOrg, gzipSync('/* 101 */'))).status, 429, 'the first org is still full');
  t.equal((await upload(await byBytes(), gzipSync('/* small */'))).status, 429, 'and the second');
  const ofDefaultOrg = await provisional('sizes');
  t.equal((await upload(ofDefaultOrg, TOGGLE)).status, 204, "another org's uploads are not counted");
});

t.test('scopes, unknown machines, cursors', async (t) => {
  const reader = new StateBackedClient(versionReader, { apiHost: node.url });
  await t.rejects(reader.machineVersions.provisionallyCreate('toggle'), errors.MissingScopeError);
  await t.rejects(reader.machineVersions.create('toggle', { code: TOGGLE }), errors.MissingScopeError);
  t.ok((await reader.machineVersions.list('toggle')).versions.length > 0, 'machine-versions.read lists');
  const p = await provisional('toggle');
  await upload(p, TOGGLE);
  const readerFinalize = await call(node.url, 'PUT', `/machines/toggle/v/${p.machineVersionId}`, { token: versionReader, body: {} });
  t.equal(readerFinalize.body.code, 'missing-scope');
  const noVersions = new StateBackedClient(machinesOnly, { apiHost: node.url });
  await t.rejects(noVersions.machineVersions.list('toggle'), errors.MissingScopeError);

  await t.rejects(client.machineVersions.provisionallyCreate('nope'), errors.NotFoundError);
  await t.rejects(client.machineVersions.list('nope'), errors.NotFoundError);
  t.equal((await finalize('nope', p.machineVersionId)).status, 404);
  t.equal((await call(node.url, 'GET', '/machines/toggle/v?cursor=bogus!', { token: writer })).body.parameter, 'cursor');
  const foreignCursor = Buffer.from(JSON.stringify({ a: 'm4' })).toString('base64url');
  t.equal((await call(node.url, 'GET', `/machines/toggle/v?cursor=${foreignCursor}`, { token: writer })).body.parameter, 'cursor');
});

t.test('indexSelectors must name declared indexes', async (t) => {
  t.equal(
    (await call(node.url, 'POST', '/machines', { token: writer, body: { slug: 'indexed', indexes: ['email', 'score'] } })).status,
    201,
  );
  const cases: Array<[unknown, number]> = [
    [{ nope: '$.x' }, 400],
    [{ email: 5 }, 400],
    [{ email: 'no-dollar' }, 400],
    [['$.email'], 400],
    [{ email: '$.email' }, 200],
    [{ score: '$.public.score' }, 200],
    [{ email: '$..email' }, 200],
    [{ email: '$.people[*].email' }, 200],
    [{ email: '$..people..email' }, 200],
    [{ email: '$.people[?(@.active)].email' }, 400],
    [{ email: '$.people[' }, 400],
    [{ email: "$['people" }, 400],
  ];
  for (const [indexSelectors, status] of cases) {
    const p = await provisional('indexed');
    await upload(p, TOGGLE);
    const res = await finalize('indexed', p.machineVersionId, { indexSelectors, makeCurrent: true });
    t.equal(res.status, status, JSON.stringify(indexSelectors));
    if (status === 400) t.match(res.body, { code: 'invalid-parameter', parameter: 'indexSelectors' });
  }
  const p = await provisional('toggle');
  await upload(p, TOGGLE);
  const undeclared = await finalize('toggle', p.machineVersionId, { indexSelectors: { email: '$.email' } });
  t.match(undeclared, { status: 400, body: { parameter: 'indexSelectors', error: /declares none/ } });
  t.equal((await finalize('toggle', p.machineVersionId, { clientInfo: 7 })).body.parameter, 'clientInfo');
  t.equal((await finalize('toggle', p.machineVersionId, { makeCurrent: 'yes' })).body.parameter, 'makeCurrent');
});

t.test('deleting a machine deletes its versions', async (t) => {
  await client.machines.create('doomed');
  const v = await client.machineVersions.create('doomed', { clientInfo: 'old', makeCurrent: true, code: TOGGLE });
  const pending = await provisional('doomed');
  await upload(pending, TOGGLE);
  await client.machines.dangerously.delete('doomed', { dangerDataWillBeDeletedForever: true });
  await t.rejects(client.machineVersions.list('doomed'), errors.NotFoundError);
  await client.machines.create('doomed');
  t.same(await client.machineVersions.list('doomed'), { versions: [] }, 'the new machine of the same name starts empty');
  t.notOk('currentVersion' in (await client.machines.get('doomed')).machine);
  const late = await finalize('doomed', pending.machineVersionId);
  t.equal(late.status, 400, 'the pending upload went with the machine');
  t.match(late.body.error, /no code was uploaded/);
  t.not(v.machineVersionId, undefined);
});
