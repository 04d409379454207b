import t from 'tap';
import type { LogEntry } from '../src/store/log-store.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { JetStreamOpLog } from '../src/store/jetstream/op-log.js';
import { applyMetaOp, type MetaOp } from '../src/store/jetstream/meta-ops.js';
import { applyLogsOp, type LogsOp, ReplicatedLogStore } from '../src/store/jetstream/replicated-logs.js';
import { openCodeStore } from '../src/store/jetstream/replicated-versions.js';
import { usageMonth } from '../src/store/instance-store.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';

/**
 * A cluster node's copy of the LOGS and META logs (machine logs; orgs, versions and usage counts) is
 * written without a sync per write, and a checkpoint written every second says from where to follow them
 * after a crash: what is replayed may be in the copy already. It must not count twice: machine log lines
 * (replicated-logs.ts) and usage counts (meta-ops.ts), which are added, not set.
 */

const skip = natsMissing();
const line = (n: number, timestamp = 1_000): LogEntry => ({ orgId: 'org_a', timestamp, level: 'log', machine: 'm', args: [`line ${n}`] });
const texts = (entries: LogEntry[]) => entries.map((entry) => entry.args[0]);

/** A nats-server (R1 logs), a connection to it, and a node's LMDB copy, all gone at the test's end. */
const nodeCopy = async (t: { teardown(fn: () => unknown): void; fail(message: string): unknown }) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const nc = await connectTo(nats, 'replays');
  t.teardown(() => nc.close());
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const local = openLmdbNodeStore(dir);
  t.teardown(() => local.close());
  const fail = (message: string, error: unknown) => t.fail(`${message}: ${String(error)}`);
  return { nc, local, fail };
};

t.test('a batch kept again at its log position replaces its first copy', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const store = openLmdbNodeStore(dir);
  t.teardown(() => store.close());
  await store.logs.appendLogs([line(1), line(2)], 7);
  await store.logs.appendLogs([line(3)], 8);
  await store.logs.appendLogs([line(1), line(2)], 7);
  t.same(texts(store.logs.listLogs('org_a', 0, 10_000, 100)), ['line 1', 'line 2', 'line 3'], 'each line once, in log order');
  // Lines of the same millisecond from batches without a position (the embedded node's) are all kept.
  await store.logs.appendLogs([line(4, 2_000)]);
  await store.logs.appendLogs([line(4, 2_000)]);
  t.equal(store.logs.listLogs('org_a', 2_000, 3_000, 100).length, 2);
});

t.test('a node that replays the LOGS log over its copy (a crash before its checkpoint) keeps each line once', { skip }, async (t) => {
  const { nc, local, fail } = await nodeCopy(t);
  const open = (from: number) =>
    JetStreamOpLog.open<LogsOp>(nc, { cluster: 'c', name: 'LOGS', replicas: 1, from }, applyLogsOp(local.logs), fail);

  const first = await open(1);
  const logs = new ReplicatedLogStore(local.logs, first);
  // Three batches, the same millisecond throughout (where the keys of a replay and the first copy meet).
  await logs.appendLogs([line(1), line(2)]);
  await logs.appendLogs([line(3)]);
  await logs.appendLogs([line(4), line(5), line(6)]);
  const before = texts(local.logs.listLogs('org_a', 0, 10_000, 100));
  t.same(before, ['line 1', 'line 2', 'line 3', 'line 4', 'line 5', 'line 6']);
  await first.close();

  // The checkpoint said 1: batches 2 and 3 come again, over a copy that has them.
  const again = await open(2);
  t.teardown(() => again.close());
  await again.catchUp();
  t.same(texts(local.logs.listLogs('org_a', 0, 10_000, 100)), before, 'the replayed batches are not there twice');
  await new ReplicatedLogStore(local.logs, again).appendLogs([line(7)]);
  t.same(texts(local.logs.listLogs('org_a', 0, 10_000, 100)), [...before, 'line 7'], 'and the next batch adds to them');
});

t.test('usage counts replayed from the META log over a copy that has them are not added again', { skip }, async (t) => {
  const { nc, local, fail } = await nodeCopy(t);
  const code = await openCodeStore(nc, { cluster: 'c', replicas: 1 });
  const open = (from: number) =>
    JetStreamOpLog.open<MetaOp>(
      nc,
      { cluster: 'c', name: 'META', replicas: 1, from },
      applyMetaOp(local.catalog, local.versions, code, local.instances),
      fail,
    );
  const atMs = Date.UTC(2026, 10, 15);
  const count = (transitions: number): MetaOp => ({
    store: 'usage',
    method: 'addUsage',
    args: ['org_a', { transitions, reads: 1 }, 'm', atMs],
  });
  const month = usageMonth(atMs);

  const first = await open(1);
  for (const transitions of [1, 2, 4]) await first.submit(count(transitions), { everywhere: false });
  t.same(local.instances.getUsage('org_a', month), { transitions: 7, reads: 3 });
  await first.close();

  // The checkpoint said 1: the counts at 2 and 3 come again, over a copy that has them.
  const again = await open(2);
  t.teardown(() => again.close());
  await again.catchUp();
  t.same(local.instances.getUsage('org_a', month), { transitions: 7, reads: 3 }, 'the replayed counts are not added twice');
  await again.submit(count(8), { everywhere: false });
  t.same(local.instances.getUsage('org_a', month), { transitions: 15, reads: 4 }, 'the next count is added');
  t.same(local.instances.listUsage('org_a', 1)[0]?.machines, [{ machine: 'm', transitions: 15, reads: 4 }], "and so is the machine's");
});
