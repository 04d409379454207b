import { join } from 'node:path';
import { open } from 'lmdb';
import t from 'tap';
import { type InstanceHead, SequenceConflictError, usageMonth } from '../src/store/instance-store.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';
import { instanceHead, transitionRecord as record } from './helpers/store-records.js';

/** Heads here keep their snapshot as an object, as heads written before it became JSON text. */
const head = (seq: number, extra: Partial<InstanceHead> = {}): InstanceHead =>
  instanceHead(seq, { snapshot: { xstate: 4, state: {} }, ...extra });

t.test('commits are sequence-checked, histories ordered, usage counted, deletion complete', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  const { instances, catalog } = store;
  t.equal(await instances.createInstance(head(1), [record(1)]), true);
  t.equal(await instances.createInstance(head(1), [record(1)]), false, 'a second create of the same name is refused');
  t.equal(catalog.hasInstances('org_a', 'm'), true, 'the catalog sees the instance');
  t.equal(catalog.hasInstances('org_b', 'm'), false, 'other orgs do not');

  await instances.commit(head(3), head(1), [record(2), record(3)]);
  await t.rejects(
    instances.commit(head(4), head(1), [record(4)]),
    SequenceConflictError,
    'a writer that lost track of the head cannot write',
  );
  t.equal(instances.getInstance('org_a', 'm', 'i')?.seq, 3);
  t.same(
    instances.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.seq),
    [1, 2, 3],
  );
  t.same(
    instances.listTransitions('org_a', 'm', 'i', 1, 1).map((r) => r.seq),
    [2],
    'pages start after the cursor',
  );

  await instances.addUsage('org_a', { transitions: 3, reads: 0 });
  await instances.addUsage('org_a', { transitions: 0, reads: 5 });
  t.same(instances.getUsage('org_a', usageMonth(Date.now())), { transitions: 3, reads: 5 }, 'usage adds up');
  t.same(instances.getUsage('org_b', usageMonth(Date.now())), { transitions: 0, reads: 0 });

  await instances.replaceHead(head(3, { status: 'paused' }), head(3));
  t.equal(instances.getInstance('org_a', 'm', 'i')?.status, 'paused');
  t.equal(await instances.deleteInstance('org_a', 'm', 'i'), true);
  t.equal(instances.getInstance('org_a', 'm', 'i'), undefined);
  t.same(instances.listTransitions('org_a', 'm', 'i', 0, 10), [], 'the history went with it');
  t.equal(catalog.hasInstances('org_a', 'm'), false);
  t.equal(await instances.deleteInstance('org_a', 'm', 'i'), false);
  await store.close();
});

t.test('a commit whose values cannot be encoded changes nothing: no new head, history, timers or outbox', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  const { instances } = store;
  // Nested far beyond what msgpackr's recursive encoder can take: it overflows the stack mid-commit.
  let deep: Record<string, unknown> = { end: true };
  for (let i = 0; i < 20_000; i++) deep = { a: deep };
  const timer = (id: string, dueAt: number) => ({ id, dueAt, kind: 'event' }) as unknown as InstanceHead['pendingTimers'][number];
  const first = head(1, { pendingTimers: [timer('t1', 1_000)] });
  t.equal(await instances.createInstance(first, [record(1)]), true);

  const outbox = [{ position: [9, 'p'], id: 'msg' }] as unknown as NonNullable<Parameters<typeof instances.commit>[3]>['outbox'];
  const bad = head(2, { pendingTimers: [timer('t2', 2_000)] });
  await t.rejects(
    instances.commit(bad, first, [record(2), { ...record(3), event: { type: 'E3', deep } }], { outbox, receivedMessageId: 'm1' }),
    RangeError,
    'the encoding error comes back',
  );
  t.same(instances.getInstance('org_a', 'm', 'i'), first, 'the head is the one before');
  t.same(
    instances.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.seq),
    [1],
    'no history record was added',
  );
  t.same(
    instances.listDueTimers(10_000, 10).map((d) => d.timerId),
    ['t1'],
    "the timer index is the old head's",
  );
  t.same(instances.listOutbox(10), [], 'no outbox message');
  t.equal(instances.hasReceived('org_a', 'm', 'i', 'm1'), false, 'no inbox mark');
  await instances.commit(head(2), first, [record(2)]);
  t.equal(instances.getInstance('org_a', 'm', 'i')?.seq, 2, 'the next commit from the old head lands');

  const other = head(1, { name: 'j', context: deep, pendingTimers: [timer('t3', 3_000)] });
  await t.rejects(instances.createInstance(other, [record(1)]), RangeError);
  t.equal(instances.getInstance('org_a', 'm', 'j'), undefined, 'a failed create leaves no head');
  t.same(instances.listTransitions('org_a', 'm', 'j', 0, 10), [], 'nor history');
  t.same(
    instances.listDueTimers(10_000, 10).map((d) => d.timerId),
    [],
    'nor timers',
  );
  t.equal(await instances.createInstance({ ...other, context: {} }, [record(1)]), true, 'and the name is free');
  await store.close();
});

t.test('two writers racing from the same head: the write thread lets exactly one commit', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  const { instances } = store;
  t.equal(await instances.createInstance(head(1), [record(1)]), true);
  // Both read the head at seq 1 before either commits: only the condition checked at commit can tell.
  const outcomes = await Promise.allSettled([
    instances.commit(head(2, { context: { n: 'first' } }), head(1), [record(2)]),
    instances.commit(head(2, { context: { n: 'second' } }), head(1), [record(2)]),
  ]);
  t.same(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected'],
    'the first commits, the second is refused',
  );
  await t.rejects(instances.commit(head(3), head(1), [record(3)]), SequenceConflictError, 'a lone stale commit is refused too');
  t.type((outcomes[1] as PromiseRejectedResult).reason, SequenceConflictError);
  t.same(instances.getInstance('org_a', 'm', 'i')?.context, { n: 'first' }, 'the refused writer left nothing behind');
  t.same(
    instances.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.type),
    ['E1', 'E2'],
  );

  // Timers stay indexed exactly as the head lists them, through commits and replaced heads.
  const timer = (id: string, dueAt: number) => ({ kind: 'event' as const, id, dueAt, event: { type: 'T' } });
  const withTimers = head(3, { pendingTimers: [timer('a', 100), timer('b', 200)] });
  await instances.commit(withTimers, head(2), [record(3)]);
  t.same(
    instances.listDueTimers(1_000, 10).map((d) => d.timerId),
    ['a', 'b'],
  );
  const retried = head(3, { pendingTimers: [timer('b', 300)] });
  await instances.replaceHead(retried, withTimers);
  t.same(
    instances.listDueTimers(1_000, 10).map((d) => [d.timerId, d.dueAt]),
    [['b', 300]],
    'the replaced head re-indexed its timers',
  );
  await instances.commit(head(4), retried, [record(4)]);
  t.same(instances.listDueTimers(1_000, 10), [], 'and the next commit dropped them');
  await store.close();
});

t.test('a data dir whose heads predate versions is upgraded once, and commits go on', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  // Write a head the way the first format did: no entry version.
  const old = open({ path: join(dir, 'statehold.lmdb'), compression: false, maxDbs: 32 });
  await old.openDB({ name: 'instances', encoding: 'msgpack' }).put(['org_a', 'm', 'i'], head(7));
  await old.close();
  const store = openLmdbNodeStore(dir);
  t.same(store.instances.getInstance('org_a', 'm', 'i')?.context, { n: 7 }, 'the head reads back');
  await store.instances.commit(head(8), head(7), [record(8)]);
  t.equal(store.instances.getInstance('org_a', 'm', 'i')?.seq, 8, 'and a commit that names it lands');
  await t.rejects(store.instances.commit(head(9), head(7), [record(9)]), SequenceConflictError);
  await store.close();
});

t.test('log retention removes only old entries of the org', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  const entry = (orgId: string, timestamp: number) => ({ orgId, timestamp, level: 'log', args: [`at ${timestamp}`] });
  await store.logs.appendLogs([entry('org_a', 1000), entry('org_a', 2000), entry('org_a', 3000), entry('org_b', 1000)]);
  t.equal(await store.logs.pruneBefore('org_a', 2500), 2);
  t.same(
    store.logs.listLogs('org_a', 0, 10_000, 10).map((e) => e.timestamp),
    [3000],
  );
  t.same(
    store.logs.listLogs('org_b', 0, 10_000, 10).map((e) => e.timestamp),
    [1000],
    'other orgs keep theirs',
  );
  await store.close();
});

t.test("usage given as a run's totals so far: copies of the log that differ sum to the same counts", async (t) => {
  const dirs = [tempDataDir(), tempDataDir()];
  const stores = dirs.map((dir) => openLmdbNodeStore(dir));
  t.teardown(async () => {
    for (const store of stores) await store.close();
    for (const dir of dirs) removeDir(dir);
  });
  const atMs = Date.UTC(2026, 10, 15);
  const month = usageMonth(atMs);
  // Two nodes' runs, each batch with what its run counted so far (its own counts being 3, 4, 5 and 2, 6).
  const batch = (run: string, transitions: number, reads: number) => ({ run, totals: { transitions, reads } });
  const a1 = batch('run-a', 3, 1);
  const a2 = batch('run-a', 7, 1);
  const a3 = batch('run-a', 12, 2);
  const b1 = batch('run-b', 2, 0);
  const b2 = batch('run-b', 8, 3);
  // (the second argument is what a release before totals would add; here it is not used)
  const ignored = { transitions: 1_000, reads: 1_000 };
  const apply = async (store: (typeof stores)[number], sequence: Array<ReturnType<typeof batch>>) => {
    for (const [i, counted] of sequence.entries()) await store.instances.addUsage('org_a', ignored, 'm', atMs, i + 1, counted);
  };
  // One copy as the leader has it; the other missing a2 and b1, a1 there twice, a2's totals after a3's.
  await apply(stores[0]!, [a1, b1, a2, b2, a3]);
  await apply(stores[1]!, [a1, a1, b2, a3, a2]);
  for (const [i, store] of stores.entries()) {
    t.same(store.instances.getUsage('org_a', month), { transitions: 20, reads: 5 }, `copy ${i + 1}: every count once`);
    t.same(
      store.instances.listUsage('org_a', 1)[0]?.machines,
      [{ machine: 'm', transitions: 20, reads: 5 }],
      `copy ${i + 1}: the machine's`,
    );
  }
  // A later run of node a (restarted) counts from nothing again: its totals add to the earlier run's.
  for (const store of stores) await store.instances.addUsage('org_a', ignored, 'm', atMs, 10, batch('run-a2', 1, 0));
  t.same(stores[1]!.instances.getUsage('org_a', month), { transitions: 21, reads: 5 }, "a new run's counts add to the old run's");
  // Another machine of the same run is kept apart; so is another month.
  await stores[0]!.instances.addUsage('org_a', ignored, 'n', atMs, 11, batch('run-a', 4, 0));
  await stores[0]!.instances.addUsage('org_a', ignored, 'm', Date.UTC(2026, 11, 2), 12, batch('run-a', 5, 0));
  t.same(stores[0]!.instances.getUsage('org_a', month), { transitions: 25, reads: 5 });
  t.same(stores[0]!.instances.getUsage('org_a', usageMonth(Date.UTC(2026, 11, 2))), { transitions: 5, reads: 0 });
  // The runs' totals of months before the one before the latest are let go: there, a batch of November
  // repeated after one of January would count again (none comes so late: a node sends within seconds).
  await stores[0]!.instances.addUsage('org_a', ignored, 'm', atMs, 13, a3);
  t.same(stores[0]!.instances.getUsage('org_a', month), { transitions: 25, reads: 5 }, 'a repeat counts nothing while kept');
  await stores[0]!.instances.addUsage('org_a', ignored, 'm', Date.UTC(2027, 0, 3), 14, batch('run-a', 6, 0));
  await stores[0]!.instances.addUsage('org_a', ignored, 'm', Date.UTC(2026, 11, 3), 15, batch('run-a', 5, 0));
  t.same(stores[0]!.instances.getUsage('org_a', usageMonth(Date.UTC(2026, 11, 3))), { transitions: 5, reads: 0 }, "December's kept");
  await stores[0]!.instances.addUsage('org_a', ignored, 'm', atMs, 16, a3);
  t.same(stores[0]!.instances.getUsage('org_a', month), { transitions: 37, reads: 7 }, "November's let go");
});
