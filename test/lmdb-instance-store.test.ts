import t from 'tap';
import { type InstanceHead, SequenceConflictError, usageMonth } from '../src/store/instance-store.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';

const head = (seq: number, extra: Partial<InstanceHead> = {}): InstanceHead => ({
  orgId: 'org_a', machine: 'm', name: 'i', createdAt: new Date(0).toISOString(), versionId: 'ver_x', status: 'running',
  seq, ts: seq, state: 'idle', context: { n: seq }, tags: [], done: false,
  snapshot: { xstate: 4, state: {} }, pendingTimers: [], stoppedChildren: [], ...extra,
});
const record = (seq: number) => ({ seq, createdAt: new Date(seq).toISOString(), ts: seq, event: { type: `E${seq}` }, state: 'idle', context: { n: seq } });

t.test('commits are sequence-checked, histories ordered, usage counted, deletion complete', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  const { instances, catalog } = store;
  t.equal(await instances.createInstance(head(1), [record(1)]), true);
  t.equal(await instances.createInstance(head(1), [record(1)]), false, 'a second create of the same name is refused');
  t.equal(catalog.hasInstances('org_a', 'm'), true, 'the catalog sees the instance');
  t.equal(catalog.hasInstances('org_b', 'm'), false, 'other orgs do not');

  await instances.commit(head(3), 1, [record(2), record(3)]);
  await t.rejects(instances.commit(head(4), 1, [record(4)]), SequenceConflictError, 'a writer that lost track of the head cannot write');
  t.equal(instances.getInstance('org_a', 'm', 'i')?.seq, 3);
  t.same(instances.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.seq), [1, 2, 3]);
  t.same(instances.listTransitions('org_a', 'm', 'i', 1, 1).map((r) => r.seq), [2], 'pages start after the cursor');

  await instances.addUsage('org_a', { transitions: 3, reads: 0 });
  await instances.addUsage('org_a', { transitions: 0, reads: 5 });
  t.same(instances.getUsage('org_a', usageMonth(Date.now())), { transitions: 3, reads: 5 }, 'usage adds up');
  t.same(instances.getUsage('org_b', usageMonth(Date.now())), { transitions: 0, reads: 0 });

  await instances.replaceHead(head(3, { status: 'paused' }), 3);
  t.equal(instances.getInstance('org_a', 'm', 'i')?.status, 'paused');
  t.equal(await instances.deleteInstance('org_a', 'm', 'i'), true);
  t.equal(instances.getInstance('org_a', 'm', 'i'), undefined);
  t.same(instances.listTransitions('org_a', 'm', 'i', 0, 10), [], 'the history went with it');
  t.equal(catalog.hasInstances('org_a', 'm'), false);
  t.equal(await instances.deleteInstance('org_a', 'm', 'i'), false);
  await store.close();
});

t.test('log retention removes only old entries of the org', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  const entry = (orgId: string, timestamp: number) => ({ orgId, timestamp, level: 'log', args: [`at ${timestamp}`] });
  await store.logs.appendLogs([entry('org_a', 1000), entry('org_a', 2000), entry('org_a', 3000), entry('org_b', 1000)]);
  t.equal(await store.logs.pruneBefore('org_a', 2500), 2);
  t.same(store.logs.listLogs('org_a', 0, 10_000, 10).map((e) => e.timestamp), [3000]);
  t.same(store.logs.listLogs('org_b', 0, 10_000, 10).map((e) => e.timestamp), [1000], 'other orgs keep theirs');
  await store.close();
});
