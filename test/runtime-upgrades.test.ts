import t from 'tap';
import type { FakeMachine } from './helpers/fake-sandbox.js';
import { historyOf, MACHINE, noAuth, ORG, runtimeHarness } from './helpers/runtime-harness.js';

/**
 * The lazy upgrade in process (helpers/runtime-harness.ts): a desired version is recorded on the head
 * alone; the next event runs the migration chain, commits the upgrade record on the new version, and
 * then runs on the new version's machine. A migration that fails leaves the instance where it was.
 */
const v1: FakeMachine = { initial: 'old', states: { old: { on: { GO: { target: 'old-went' } } }, 'old-went': {} } };
const v2: FakeMachine = {
  initial: 'new',
  states: { new: { on: { GO: { target: 'new-went', assign: (c) => ({ ...c, ranOn: 'v2' }) } } }, 'new-went': {} },
};
const migrations = [
  { id: 'mig_1', fromVersionId: 'v1', toVersionId: 'v2' },
  { id: 'mig_back', fromVersionId: 'v2', toVersionId: 'v1' },
];

t.test('a target version is upgraded to when the next event comes, and the event runs on the new version', async (t) => {
  const migrated: string[] = [];
  const h = runtimeHarness({
    versions: { v1, v2, v3: v2 },
    migrations,
    migrate: (id, input) => {
      migrated.push(id);
      return {
        ...input,
        paths: input.paths.map((path) => path.map((node) => (node === 'old' ? 'new' : node))),
        context: { ...input.context, migrated: true },
      };
    },
  });
  t.teardown(() => h.close());
  const created = await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'u', versionId: 'v1', context: {}, authContext: noAuth });
  await t.rejects(h.runtime.setTargetVersion(ORG, MACHINE, 'u', 'v3'), { status: 400, code: 'no-migration-path' });
  await h.runtime.setTargetVersion(ORG, MACHINE, 'u', 'v2');
  const targeted = h.store.instances.getInstance(ORG, MACHINE, 'u');
  t.equal(targeted?.targetVersionId, 'v2', 'recorded on the head');
  t.equal(targeted?.seq, created.seq, 'no record: nothing ran yet');
  t.same(migrated, []);
  const after = await h.runtime.send(ORG, MACHINE, 'u', { type: 'GO' }, noAuth);
  t.same(migrated, ['mig_1']);
  t.same(historyOf(h, 'u'), ['xstate.init', 'statebacked.upgrade', 'GO']);
  const upgrade = h.store.instances.listTransitions(ORG, MACHINE, 'u', 0, 10)[1];
  t.same(upgrade?.event, { type: 'statebacked.upgrade', migrationPath: ['mig_1'], fromMachineVersionId: 'v1', toMachineVersionId: 'v2' });
  t.equal(upgrade?.state, 'new', 'the upgrade record holds the migrated state');
  t.equal(after.versionId, 'v2');
  t.equal(after.targetVersionId, undefined, 'reached');
  t.equal(after.state, 'new-went', "GO ran on v2's machine");
  t.same(after.context, { migrated: true, ranOn: 'v2' });
  t.same(
    h.logs.lines.map((line) => line.message),
    ['upgraded from v1 to v2 (migrations mig_1)'],
  );
  await h.runtime.setTargetVersion(ORG, MACHINE, 'u', 'v2');
  t.equal(h.runtime.head(ORG, MACHINE, 'u')?.targetVersionId, undefined, 'its own version is no target');
});

t.test('a migration that gives no state of the new machine fails the event and leaves the instance on its version', async (t) => {
  const h = runtimeHarness({ versions: { v1, v2 }, migrations, migrate: (_id, input) => ({ ...input, paths: [] }) });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'u', versionId: 'v1', context: {}, authContext: noAuth });
  await h.runtime.setTargetVersion(ORG, MACHINE, 'u', 'v2');
  await t.rejects(h.runtime.send(ORG, MACHINE, 'u', { type: 'GO' }, noAuth), {
    status: 400,
    message: /^upgrading from v1 to v2 failed, the instance stays on v1: /,
  });
  const head = h.runtime.head(ORG, MACHINE, 'u');
  t.equal(head?.versionId, 'v1');
  t.equal(head?.targetVersionId, 'v2', 'still wanted');
  t.equal(head?.state, 'old');
  t.same(historyOf(h, 'u'), ['xstate.init']);
  t.same(
    h.logs.lines.map((line) => line.level),
    ['error'],
  );
});
