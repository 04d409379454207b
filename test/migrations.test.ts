import { gzipSync } from 'node:zlib';
import { errors, StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import t from 'tap';
import { migrationPath } from '../src/domain/migration-path.js';
import { TOGGLE } from './fixtures/machines.js';
import { call } from './helpers/http.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';
import { startNode } from './helpers/node-process.js';
import { replicatedVersionsNode } from './helpers/replicated-versions-node.js';
import { tempNodeStore } from './helpers/temp-store.js';

const MIGRATION = `export function upgradeState(path, context) { return path; }
export function upgradeContext(oldPaths, newPaths, context) { return context; }
`;

t.test('migration path: shortest chain of migrations, each from its from version to its to version', async (t) => {
  const edges = [
    { id: 'm12', fromVersionId: 'v1', toVersionId: 'v2' },
    { id: 'm23', fromVersionId: 'v2', toVersionId: 'v3' },
    { id: 'm32', fromVersionId: 'v3', toVersionId: 'v2' },
    { id: 'm34', fromVersionId: 'v3', toVersionId: 'v4' },
    { id: 'm14', fromVersionId: 'v1', toVersionId: 'v4' },
    { id: 'm56', fromVersionId: 'v5', toVersionId: 'v6' },
  ];
  t.same(migrationPath(edges, 'v1', 'v1'), [], 'the same version: nothing to run');
  t.same(migrationPath(edges, 'v1', 'v2'), [{ migrationId: 'm12', fromVersionId: 'v1', toVersionId: 'v2' }]);
  t.equal(migrationPath(edges, 'v2', 'v1'), undefined, 'a migration does not run backwards');
  t.same(
    migrationPath(edges, 'v3', 'v2')?.map((step) => step.migrationId),
    ['m32'],
    'back to an older version through a migration made for that',
  );
  t.same(
    migrationPath(edges, 'v1', 'v3')?.map((step) => step.migrationId),
    ['m12', 'm23'],
    'two hops',
  );
  t.same(
    migrationPath(edges, 'v1', 'v4')?.map((step) => step.migrationId),
    ['m14'],
    'one hop rather than three',
  );
  t.same(
    migrationPath(
      edges.filter((edge) => edge.id !== 'm14'),
      'v1',
      'v4',
    )?.map((step) => step.migrationId),
    ['m12', 'm23', 'm34'],
    'three hops when no shorter chain exists',
  );
  t.equal(migrationPath(edges, 'v1', 'v6'), undefined, 'unconnected');
  t.equal(migrationPath(edges, 'v7', 'v1'), undefined, 'unknown version');
  t.equal(migrationPath([], 'v1', 'v2'), undefined, 'no migrations');
  const again = [
    { id: 'a-first', fromVersionId: 'v1', toVersionId: 'v2', createdAt: '2026-11-30T01:00:00.000Z' },
    { id: 'z-fix', fromVersionId: 'v1', toVersionId: 'v2', createdAt: '2026-11-30T02:00:00.000Z' },
    { id: 'b-next', fromVersionId: 'v2', toVersionId: 'v3', createdAt: '2026-11-30T00:00:00.000Z' },
  ];
  for (const order of [again, [...again].reverse()])
    t.same(
      migrationPath(order, 'v1', 'v3')?.map((step) => step.migrationId),
      ['z-fix', 'b-next'],
      'a migration made again for the same hop replaces the earlier one, whatever their ids and order',
    );
  // A cycle must not loop.
  t.equal(
    migrationPath(
      [
        { id: 'a', fromVersionId: 'x', toVersionId: 'y' },
        { id: 'b', fromVersionId: 'y', toVersionId: 'x' },
      ],
      'x',
      'z',
    ),
    undefined,
  );
});

t.test('LMDB version store: migrations are kept per machine and go with it', async (t) => {
  const store = tempNodeStore(t);
  const { catalog, versions } = store;
  await catalog.createMachine({ orgId: 'org_a', slug: 'm', createdAt: '2024-01-01T00:00:00.000Z', indexes: [] });
  await catalog.createMachine({ orgId: 'org_a', slug: 'n', createdAt: '2024-01-01T00:00:00.000Z', indexes: [] });
  const record = (id: string, machine = 'm') => ({
    id,
    orgId: 'org_a',
    machine,
    fromVersionId: 'ver_1',
    toVersionId: 'ver_2',
    createdAt: '2024-01-02T00:00:00.000Z',
  });
  await versions.putPendingUpload({ orgId: 'org_a', machine: 'm', versionId: 'mig_1', code: 'one', expiresAt: Date.now() + 60_000 });
  t.match(await versions.finalizeMigration(record('mig_1'), 'one'), { kind: 'created', record: { id: 'mig_1' } });
  t.equal(versions.getPendingUpload('org_a', 'mig_1'), undefined, 'finalization drops the pending upload');
  t.match(await versions.finalizeMigration({ ...record('mig_1'), toVersionId: 'ver_9' }, 'changed'), {
    kind: 'existing',
    record: { toVersionId: 'ver_2' },
  });
  t.equal(versions.getMigrationCode('org_a', 'mig_1'), 'one', 'a repeated finalize writes nothing');
  t.same(await versions.finalizeMigration(record('mig_x', 'gone'), 'x'), { kind: 'no-machine' });
  await versions.finalizeMigration(record('mig_2'), 'two');
  await versions.finalizeMigration(record('mig_3', 'n'), 'three');
  t.same(
    versions.listMigrations('org_a', 'm').map((m) => m.id),
    ['mig_1', 'mig_2'],
  );
  t.equal(versions.getMigration('org_a', 'n', 'mig_1'), undefined, 'only under its machine');
  t.equal(versions.getMigration('org_b', 'm', 'mig_1'), undefined, 'only in its org');
  await versions.deleteMachineVersions('org_a', 'm');
  t.same(versions.listMigrations('org_a', 'm'), [], 'machine deletion removes its migrations');
  t.equal(versions.getMigrationCode('org_a', 'mig_1'), undefined, 'and their code');
  t.same(
    versions.listMigrations('org_a', 'n').map((m) => m.id),
    ['mig_3'],
    'another machine keeps its own',
  );
});

t.test(
  'cluster: a migration finalized on one node is on the others, code from the object store; machine deletion removes both',
  { skip: natsMissing() },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const node = (name: string) => replicatedVersionsNode(t, nats, name);
    const a = await node('a');
    const b = await node('b');
    const objects = async () => (await a.code.list()).map((info) => info.name).sort();
    await a.catalog.createOrg({ id: 'org_1', name: 'one', createdAt: new Date().toISOString(), allowAnonymousAccess: true });
    await a.catalog.createMachine({ orgId: 'org_1', slug: 'm', createdAt: new Date().toISOString(), indexes: [] });

    await a.versions.putPendingUpload({
      orgId: 'org_1',
      machine: 'm',
      versionId: 'mig_1',
      code: MIGRATION,
      expiresAt: Date.now() + 60_000,
    });
    const record = {
      id: 'mig_1',
      orgId: 'org_1',
      machine: 'm',
      fromVersionId: 'ver_1',
      toVersionId: 'ver_2',
      createdAt: new Date().toISOString(),
    };
    t.same(await a.versions.finalizeMigration(record, MIGRATION), { kind: 'created', record });
    t.match(await objects(), [/^migration\/org_1\/mig_1\/[0-9a-f]{64}$/], 'the code object stays, the pending one went');
    await b.log.catchUp();
    t.same(b.versions.getMigration('org_1', 'm', 'mig_1'), record, 'b reads the migration finalized on a');
    t.equal(b.versions.getMigrationCode('org_1', 'mig_1'), MIGRATION, 'with its code');
    t.same(b.versions.listMigrations('org_1', 'm'), [record]);
    t.equal(b.versions.getPendingUpload('org_1', 'mig_1'), undefined);
    t.match(await b.versions.finalizeMigration({ ...record, toVersionId: 'ver_9' }, 'other bytes'), {
      kind: 'existing',
      record: { toVersionId: 'ver_2' },
    });
    t.equal((await objects()).length, 1, "a repeat's useless object was deleted");

    await b.versions.deleteMachineVersions('org_1', 'm');
    await a.log.catchUp();
    t.same(a.versions.listMigrations('org_1', 'm'), [], 'machine deletion on b removed the migration on a');
    t.equal(a.versions.getMigrationCode('org_1', 'mig_1'), undefined);
    t.same(await objects(), [], 'and its code object');

    const c = await node('c');
    await c.log.catchUp();
    t.same(c.versions.listMigrations('org_1', 'm'), [], 'a node replaying the log without the objects reaches the same state');
  },
);

t.test('over HTTP with the 0.1.37 client', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());
  const created = await call(node.url, 'POST', '/keys', {
    token: node.adminKey as string,
    body: {
      name: 'k',
      scopes: [
        'machines.read',
        'machines.write',
        'machines.admin',
        'machine-versions.read',
        'machine-versions.write',
        'instances.read',
        'instances.write',
        'instances.admin',
        'state.read',
      ],
    },
  });
  const token = await signToken(
    { stateBackedKeyId: created.body.id, stateBackedSecretKey: created.body.key },
    { sub: 'ci' },
    { expires: { in: '1h' } },
  );
  const client = new StateBackedClient(token, { apiHost: node.url });

  await client.machines.create('mig');
  await client.machines.create('other');
  const version = async (machine: string, makeCurrent = false) =>
    (await client.machineVersions.create(machine, { clientInfo: 'x', makeCurrent, code: TOGGLE })).machineVersionId;
  const v1 = await version('mig', true);
  const v2 = await version('mig');
  const v3 = await version('mig');
  const v4 = await version('mig');
  const foreign = await version('other', true);
  await client.machineInstances.create('mig', { slug: 'i1', context: {} });

  const m12 = await client.machineVersionMigrations.create('mig', { fromMachineVersionId: v1, toMachineVersionId: v2, code: MIGRATION });
  t.match(m12, { machineVersionMigrationId: /^mig_[A-Za-z0-9_-]{22}$/ }, 'finalize answers the real id');
  // gzipped; and one back from v3 to v2 (a path may go back to an older version too).
  const m23 = await client.machineVersionMigrations.create('mig', {
    fromMachineVersionId: v2,
    toMachineVersionId: v3,
    gzippedCode: gzipSync(MIGRATION),
  });
  t.not((m23 as any).machineVersionMigrationId, (m12 as any).machineVersionMigrationId);
  await client.machineVersionMigrations.create('mig', { fromMachineVersionId: v3, toMachineVersionId: v2, code: MIGRATION });

  await t.test('bad provisional bodies', async (t) => {
    const post = (body: unknown) => call(node.url, 'POST', '/machines/mig/migrations', { token, body });
    t.match(await post({ toMachineVersionId: v2 }), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'fromMachineVersionId' },
    });
    t.match(await post({ fromMachineVersionId: v1 }), { status: 400, body: { parameter: 'toMachineVersionId' } });
    t.match(await post({ fromMachineVersionId: 7, toMachineVersionId: v2 }), { status: 400, body: { parameter: 'fromMachineVersionId' } });
    t.match(await post({ fromMachineVersionId: v1, toMachineVersionId: v1 }), { status: 400, body: { parameter: 'toMachineVersionId' } });
    // An unknown version is a wrong parameter (400 naming it), not a missing resource: the machine exists.
    t.match(await post({ fromMachineVersionId: v1, toMachineVersionId: 'ver_AAAAAAAAAAAAAAAAAAAAAA' }), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'toMachineVersionId', error: /has no version ver_AAAAAAAAAAAAAAAAAAAAAA/ },
    });
    t.match(await post({ fromMachineVersionId: 'ver_AAAAAAAAAAAAAAAAAAAAAA', toMachineVersionId: v2 }), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'fromMachineVersionId' },
    });
    t.match(
      await post({ fromMachineVersionId: foreign, toMachineVersionId: v2 }),
      { status: 400, body: { code: 'invalid-parameter', parameter: 'fromMachineVersionId' } },
      "another machine's version",
    );
    t.match(await post({ fromMachineVersionId: 'not-a-ver', toMachineVersionId: v2 }), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'fromMachineVersionId' },
    });
    t.match(
      await call(node.url, 'POST', '/machines/nope/migrations', { token, body: { fromMachineVersionId: v1, toMachineVersionId: v2 } }),
      { status: 404 },
      'an unknown machine is still a 404',
    );
    await t.rejects(
      client.machineVersionMigrations.create('mig', { fromMachineVersionId: v1, toMachineVersionId: 'ver_nope', code: MIGRATION }),
      errors.ClientError,
    );
  });

  await t.test('finalization: needs code, checks the bundle, repeats', async (t) => {
    const provisional = await call(node.url, 'POST', '/machines/mig/migrations', {
      token,
      body: { fromMachineVersionId: v1, toMachineVersionId: v2, code: 'x'.repeat(2_000_000) },
    });
    t.equal(provisional.status, 200, 'a body carrying 2 MB of code is accepted');
    const signed = provisional.body.machineVersionMigrationId as string;
    t.notMatch(signed, /^mig_/, 'the provisional id is the signed one');
    t.match(await call(node.url, 'PUT', `/machines/mig/migrations/${signed}`, { token }), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'signedMachineVersionMigrationId', error: /no code was uploaded/ },
    });
    t.match(
      await call(node.url, 'PUT', `/machines/other/migrations/${signed}`, { token }),
      { status: 400, body: { parameter: 'signedMachineVersionMigrationId' } },
      'bound to its machine',
    );
    const form = new FormData();
    for (const [key, value] of Object.entries(provisional.body.codeUploadFields as Record<string, string>)) form.append(key, value);
    form.append('file', new Blob([MIGRATION], { type: 'application/javascript' }), 'm.js');
    t.equal((await fetch(provisional.body.codeUploadUrl, { method: 'POST', body: form })).status, 204);
    const first = await call(node.url, 'PUT', `/machines/mig/migrations/${signed}`, { token });
    t.match(first, { status: 200, body: { machineVersionMigrationId: /^mig_/ } });
    t.same(
      (await call(node.url, 'PUT', `/machines/mig/migrations/${signed}`, { token })).body,
      first.body,
      'a repeated finalize answers the same id',
    );
    const late = await fetch(provisional.body.codeUploadUrl, { method: 'POST', body: form });
    t.equal(late.status, 409, 'an upload after finalization is refused: the migration keeps its code');
    t.match(await late.json(), { code: 'invalid-state', error: /migration is already finalized/ });

    // v1 → v4 refused: afterwards v4 must still be unreachable.
    const noContext = 'export function upgradeState(path) { return path; }\nexport const upgradeContext = 42;\n';
    await t.rejects(client.machineVersionMigrations.create('mig', { fromMachineVersionId: v1, toMachineVersionId: v4, code: noContext }), {
      message: /upgradeContext must be an exported function/,
    });
    await t.rejects(
      client.machineVersionMigrations.create('mig', { fromMachineVersionId: v1, toMachineVersionId: v4, code: 'export const = ;' }),
      { message: /not a valid ES module/ },
    );
    await t.rejects(
      client.machineVersionMigrations.create('mig', {
        fromMachineVersionId: v1,
        toMachineVersionId: v4,
        code: 'throw new Error("at load");',
      }),
      { message: /upgrade|threw/ },
    );
    await t.rejects(
      client.machineVersionMigrations.create('mig', { fromMachineVersionId: v1, toMachineVersionId: v4, code: TOGGLE }),
      errors.ClientError,
      'a machine bundle is no migration',
    );
  });

  await t.test('desired version: a path through v2, none to v4', async (t) => {
    const desired = (machineVersionId: string) =>
      call(node.url, 'PUT', '/machines/mig/i/i1/v', { token, body: { targetMachineVersionId: machineVersionId } });
    t.match(await call(node.url, 'GET', '/machines/mig/i/i1/admin', { token }), { status: 200, body: { machineVersion: { id: v1 } } });
    t.notOk((await call(node.url, 'GET', '/machines/mig/i/i1/admin', { token })).body.desiredMachineVersion, 'nothing pending at first');

    await t.rejects(
      client.machineInstances.admin.updateDesiredVersion('mig', 'i1', { targetMachineVersionId: v4 }),
      errors.NoMigrationPathError,
    );
    t.match(await desired(v4), { status: 400, body: { code: 'no-migration-path' } });

    await client.machineInstances.admin.updateDesiredVersion('mig', 'i1', { targetMachineVersionId: v3 });
    const res = await desired(v3);
    t.equal(res.status, 201, '201 as the spec says (again: a repeat is fine)');
    t.equal(res.text, '', 'no body');
    const admin = await client.machineInstances.admin.get('mig', 'i1');
    t.match(admin, { machineVersion: { id: v1 }, desiredMachineVersion: { id: v3, clientInfo: 'x', createdAt: String } });

    t.match(await desired(v4), { status: 400, body: { code: 'no-migration-path' } });
    t.equal(
      ((await client.machineInstances.admin.get('mig', 'i1')) as any).desiredMachineVersion?.id,
      v3,
      'a refused target leaves the pending one',
    );

    t.match(await desired('ver_AAAAAAAAAAAAAAAAAAAAAA'), {
      status: 400,
      body: { code: 'invalid-parameter', parameter: 'targetMachineVersionId', error: /has no version ver_AAAAAAAAAAAAAAAAAAAAAA/ },
    });
    t.match(
      await desired(foreign),
      { status: 400, body: { code: 'invalid-parameter', parameter: 'targetMachineVersionId' } },
      "another machine's version",
    );
    t.match(await desired('not-a-ver'), { status: 400, body: { code: 'invalid-parameter', parameter: 'targetMachineVersionId' } });
    await t.rejects(
      client.machineInstances.admin.updateDesiredVersion('mig', 'i1', { targetMachineVersionId: 'ver_AAAAAAAAAAAAAAAAAAAAAA' }),
      errors.ClientError,
    );
    t.match(await call(node.url, 'PUT', '/machines/mig/i/i1/v', { token, body: {} }), {
      status: 400,
      body: { parameter: 'targetMachineVersionId' },
    });
    t.match(await call(node.url, 'PUT', '/machines/mig/i/nobody/v', { token, body: { targetMachineVersionId: v2 } }), { status: 404 });

    t.equal((await desired(v1)).status, 201, 'its own version');
    t.notOk(((await client.machineInstances.admin.get('mig', 'i1')) as any).desiredMachineVersion, 'clears the pending target');
    t.equal((await desired(v3)).status, 201);
    // The next event runs the chain (test/upgrades.test.ts has the details).
    const toggled = await call(node.url, 'POST', '/machines/mig/i/i1/events', { token, body: { event: 'TOGGLE' } });
    t.match(toggled, { status: 200, body: { state: 'on' } });
    t.match(await client.machineInstances.admin.get('mig', 'i1'), { machineVersion: { id: v3 } }, 'upgraded on the next event');
    t.match(await desired(v1), { status: 400, body: { code: 'no-migration-path' } }, 'no migration leads back from v3 to v1');
  });
});

t.test(
  'cluster nodes: migrations made through one node, desired versions set through the other, forwarded to each owner',
  { skip: natsMissing() },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const ADMIN = 'migrations-admin-key';
    const nodes = await startClusterNodes(t, nats, ['n1', 'n2'], { adminKey: ADMIN });
    const [one, two] = nodes.map((node) => new StateBackedClient(ADMIN, { apiHost: node.url })) as [StateBackedClient, StateBackedClient];
    await one.machines.create('mig');
    const v1 = (await one.machineVersions.create('mig', { clientInfo: '1', makeCurrent: true, code: TOGGLE })).machineVersionId;
    const v2 = (await one.machineVersions.create('mig', { clientInfo: '2', makeCurrent: false, code: TOGGLE })).machineVersionId;
    const v3 = (await one.machineVersions.create('mig', { clientInfo: '3', makeCurrent: false, code: TOGGLE })).machineVersionId;
    await one.machineVersionMigrations.create('mig', { fromMachineVersionId: v1, toMachineVersionId: v2, code: MIGRATION });
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (const name of names) await one.machineInstances.create('mig', { slug: name });

    const orgId = (await call(nodes[0]?.url as string, 'GET', '/orgs', { token: ADMIN })).body.orgs[0].id as string;
    const owners = new Set<string>();
    for (const name of names)
      owners.add(
        (await call(nodes[0]?.url as string, 'GET', `/cluster?instance=${orgId}/mig/${name}`, { token: ADMIN })).body.instance.owner,
      );
    t.same([...owners].sort(), ['n1', 'n2'], 'both nodes own some of the instances');

    for (const name of names) {
      // n2 may not have applied the migration yet when it checks: a retry makes the test about forwarding, not replication lag.
      let failure: unknown;
      for (let attempt = 0; attempt < 50; attempt++) {
        failure = await two.machineInstances.admin.updateDesiredVersion('mig', name, { targetMachineVersionId: v2 }).then(
          () => undefined,
          (error: unknown) => error,
        );
        if (!failure) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      t.equal(failure, undefined, `${name}: set through n2`);
      await t.rejects(
        two.machineInstances.admin.updateDesiredVersion('mig', name, { targetMachineVersionId: v3 }),
        errors.NoMigrationPathError,
      );
      t.match(
        await one.machineInstances.admin.get('mig', name),
        { machineVersion: { id: v1 }, desiredMachineVersion: { id: v2, clientInfo: '2' } },
        `${name}: read through n1`,
      );
    }
  },
);
