import t, { type Test } from 'tap';
import { type JetStreamClient, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { LogInstanceStore } from '../src/store/jetstream/log-instance-store.js';
import { JetStreamTransitionLog } from '../src/store/jetstream/transition-log.js';
import {
  type InstanceHead,
  type OutboxMessage,
  RequestMovedError,
  SequenceConflictError,
  type TransitionRecord,
} from '../src/store/instance-store.js';
import { connectTo, localNode, type NatsServers, natsMissing, startNats } from './helpers/nats.js';

/** Two nodes' instance stores on one TX log (a real nats-server): the owner writes, the other follows. */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A node's instance store on the TX log, following it from the start. */
const followingNode = async (
  t: { teardown(fn: () => unknown): void; fail(message: string): unknown },
  nats: NatsServers,
  name: string,
  onTimers?: (dueAt: number) => void,
) => {
  const { store, nc, beforeClose } = await localNode(t, nats, name);
  const log = await JetStreamTransitionLog.open(nc, { cluster: 'c', replicas: 1 });
  const instances = new LogInstanceStore(store.instances, log, (message, error) => t.fail(`${message}: ${String(error)}`), {
    nodeId: name,
  });
  if (onTimers) instances.onTimersApplied(onTimers);
  // (each test node holds every partition: it follows the whole log, as two owners' copies of one partition would)
  instances.own(nc, new Set(Array.from({ length: log.partitions }, (_, partition) => partition)), () => 1);
  await instances.allReady();
  beforeClose(() => instances.stopFollowing());
  // (`copy`: the LMDB store under it, which the store itself keeps private)
  return Object.assign(instances, { copy: store.instances, subjectOf: (o: string, m: string, n: string) => log.subjectOf(o, m, n) });
};

/** Two following nodes on one nats-server, and a connection that publishes entries by hand (as they are stored, without JetStream's check). */
const twoNodesAndRawWriter = async (t: Parameters<typeof followingNode>[0], writer: string) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const a = await followingNode(t, nats, 'a');
  const b = await followingNode(t, nats, 'b');
  const nc = await connectTo(nats, writer);
  t.teardown(() => nc.close());
  return { nats, a, b, nc, js: jetstream(nc) };
};

/**
 * A diverged replica, as two nats-servers: a node's local store with its connection to the "replica"
 * (which its followers read), and the TX log on the "leader" (which its appends and questions go to),
 * each server with a stream of the same name.
 */
const leaderAndReplica = async (t: Parameters<typeof followingNode>[0]) => {
  const leader = await startNats(1);
  t.teardown(() => leader.stop());
  const replica = await startNats(1);
  t.teardown(() => replica.stop());
  const { store, nc } = await localNode(t, replica, 'a');
  const leaderNc = await connectTo(leader, 'leader');
  t.teardown(() => leaderNc.close());
  const log = await JetStreamTransitionLog.open(leaderNc, { cluster: 'c', replicas: 1 });
  await JetStreamTransitionLog.open(nc, { cluster: 'c', replicas: 1 });
  return { store, nc, leaderNc, log };
};

const headAt = (seq: number, count: number, createdAt = '2026-11-25T00:00:00.000Z'): InstanceHead => ({
  orgId: 'org_a',
  machine: 'm',
  name: 'i',
  createdAt,
  versionId: 'ver_1',
  status: 'running',
  seq,
  ts: 1_000 + seq,
  state: 'on',
  context: { count },
  tags: [],
  done: false,
  snapshot: '{}',
  pendingTimers: [],
  stoppedChildren: [],
  timerAttempts: {},
});
const record = (seq: number, count: number): TransitionRecord => ({
  seq,
  createdAt: new Date(1_000 + seq).toISOString(),
  ts: 1_000 + seq,
  event: { type: 'INC', count },
  state: 'on',
});

/** A logged entry of instance `name` at head sequence `seq`, naming the log position `after`. */
const logEntry = (kind: 'create' | 'commit', name: string, seq: number, count: number, after: number) => {
  const { logSeq: _seq, ...head } = { ...headAt(seq, count), name };
  return { kind, head, history: [record(seq, count)], effects: {}, after };
};

/** The log, with `method` failing as JetStream's API does while its meta group has no leader, while `failing()` says so. */
const failingWhile = (log: JetStreamTransitionLog, method: 'get' | 'append' | 'lastSeq', failing: () => boolean) =>
  new Proxy(log, {
    get: (target, property) => {
      if (property === method)
        return async (...args: unknown[]) => {
          if (failing()) throw new Error(method === 'append' ? 'TimeoutError: timeout' : 'JetStream system temporarily unavailable');
          return (target[method] as (...a: unknown[]) => unknown).apply(target, args);
        };
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

t.test("the owner's commits reach the other node; a stale writer is fenced; delete and create again", { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const a = await followingNode(t, nats, 'a');
  const b = await followingNode(t, nats, 'b');
  const first = headAt(1, 0);
  t.equal(await a.createInstance(first, [record(1, 0)]), true);
  t.ok(first.logSeq, 'the head learnt its log position');
  t.equal(
    await b.createInstance(headAt(1, 0, '2026-11-25T00:00:01.000Z'), [record(1, 0)]),
    false,
    'a second create of the name, from another node: refused',
  );
  let head = first;
  for (let seq = 2; seq <= 20; seq++) {
    const next = headAt(seq, seq - 1);
    await a.commit(next, head, [record(seq, seq - 1)]);
    head = next;
  }
  for (let i = 0; i < 100 && b.getInstance('org_a', 'm', 'i')?.seq !== 20; i++) await sleep(10);
  t.same(b.getInstance('org_a', 'm', 'i')?.context, { count: 19 }, 'the other node has the head');
  t.equal(b.listTransitions('org_a', 'm', 'i', 0, 100).length, 20, 'and the whole history');

  // The other node takes over (as after a failover) from its own copy of the head, and writes on.
  const taken = b.getInstance('org_a', 'm', 'i') as InstanceHead;
  const byB = headAt(21, 20);
  await b.commit(byB, taken, [record(21, 20)]);
  // The old owner still holds head 20: its write is fenced.
  await t.rejects(a.commit(headAt(21, 99), head, [record(21, 99)]), SequenceConflictError, 'the old owner cannot write');
  for (let i = 0; i < 100 && a.getInstance('org_a', 'm', 'i')?.seq !== 21; i++) await sleep(10);
  t.same(a.getInstance('org_a', 'm', 'i')?.context, { count: 20 }, "the old owner's copy follows the new owner's commit");

  await b.replaceHead({ ...byB, status: 'paused' }, byB);
  for (let i = 0; i < 100 && a.getInstance('org_a', 'm', 'i')?.status !== 'paused'; i++) await sleep(10);
  t.equal(a.getInstance('org_a', 'm', 'i')?.status, 'paused', 'head-only changes travel too');

  t.equal(await a.deleteInstance('org_a', 'm', 'i'), true);
  for (let i = 0; i < 100 && b.getInstance('org_a', 'm', 'i'); i++) await sleep(10);
  t.equal(b.getInstance('org_a', 'm', 'i'), undefined, 'deleted everywhere');
  const reborn = headAt(1, 100, '2026-11-25T00:00:05.000Z');
  t.equal(await b.createInstance(reborn, [record(1, 100)]), true, 'the name can be created again after a delete');
  const second = headAt(2, 101, '2026-11-25T00:00:05.000Z');
  await b.commit(second, reborn, [record(2, 101)]);
  for (let i = 0; i < 100 && a.getInstance('org_a', 'm', 'i')?.seq !== 2; i++) await sleep(10);
  t.same(a.getInstance('org_a', 'm', 'i')?.context, { count: 101 }, "its commit 2 is not taken for the old life's commit 2");
  t.same(
    a.listTransitions('org_a', 'm', 'i', 0, 100).map((r) => r.event.count),
    [100, 101],
  );
});

t.test("a head with pending timers written by another node is reported to this node's timer scheduler", { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const node = async (name: string) => {
    const reported: number[] = [];
    const instances = await followingNode(t, nats, name, (dueAt) => reported.push(dueAt));
    return { instances, reported };
  };
  const a = await node('a');
  const b = await node('b');
  const timer = (dueAt: number) => ({ kind: 'event' as const, id: `t${dueAt}`, dueAt, event: { type: 'xstate.after(1000)#m.on' } });
  const first = { ...headAt(1, 0), pendingTimers: [timer(5_000), timer(4_000)] };
  await a.instances.createInstance(first, [record(1, 0)]);
  const second = { ...headAt(2, 1), pendingTimers: [] };
  await a.instances.commit(second, first, [record(2, 1)]);
  const third = { ...headAt(3, 2), pendingTimers: [timer(9_000)] };
  await a.instances.commit(third, second, [record(3, 2)]);
  // (reported once the follower's apply is done, a moment after the head is readable)
  for (let i = 0; i < 200 && (b.instances.getInstance('org_a', 'm', 'i')?.seq !== 3 || b.reported.length < 2); i++) await sleep(10);
  await sleep(50);
  t.same(b.reported, [4_000, 9_000], "the follower reports each applied head's earliest timer, and nothing for a head without timers");
});

const message = (id: string, position: [number, number], to = 'r'): OutboxMessage => ({
  id,
  orgId: 'org_a',
  position,
  from: { machine: 'm', name: 'i' },
  to: { machine: 'm', name: to },
  kind: 'send',
  event: { type: 'PING' },
  attempts: 0,
  nextAttemptAt: 0,
});

t.test("a delivered message leaves every node's outbox, however many entries are before it", { skip, timeout: 60_000 }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const a = await followingNode(t, nats, 'a');
  const b = await followingNode(t, nats, 'b');
  // b's copy holds 10,000 entries older than the one delivered (the earlier code looked at the first 10,000 only).
  for (let i = 0; i < 10_000; i++) void b.copy.updateOutbox(message(`msg_old${i}`, [1, i], `x${i}`));
  await b.copy.updateOutbox(message('msg_last', [1, 10_000], 'x'));
  // (what wakes b's outbox dispatcher: b owning the sender later must deliver what a's commit queued)
  let told = 0;
  b.onOutboxApplied(() => told++);
  const sender = headAt(1, 0);
  await a.createInstance(sender, [record(1, 0)], { outbox: [message('msg_ping', [2, 0])] });
  for (let i = 0; i < 200 && !b.listOutbox(20_000).some((m) => m.id === 'msg_ping'); i++) await sleep(10);
  t.ok(
    b.listOutbox(20_000).some((m) => m.id === 'msg_ping'),
    "the sender's message is in the other node's outbox",
  );
  for (let i = 0; i < 100 && told === 0; i++) await sleep(10);
  t.equal(told, 1, "and the node was told that its outbox has a message from another node's commit");
  // The receiver's commit names the message: every copy drops it.
  const receiver = { ...headAt(1, 0), name: 'r' };
  await a.createInstance(receiver, [record(1, 0)], { receivedMessageId: 'msg_ping' });
  for (let i = 0; i < 200 && b.listOutbox(20_000).some((m) => m.id === 'msg_ping'); i++) await sleep(10);
  t.notOk(
    b.listOutbox(20_000).some((m) => m.id === 'msg_ping'),
    'dropped on the node that follows',
  );
  t.equal(b.listOutbox(20_000).length, 10_001, 'and nothing else');
  t.equal(told, 1, 'a commit that queues no message tells nothing');
});

t.test('a fenced request is committed only by the node that fenced it; an append under way from before is refused', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const a = await followingNode(t, nats, 'a');
  const b = await followingNode(t, nats, 'b');
  const first = headAt(1, 0);
  await a.createInstance(first, [record(1, 0)]);
  for (let i = 0; i < 100 && !b.getInstance('org_a', 'm', 'i'); i++) await sleep(10);
  // a took request R and is slow; the node that forwarded it asks b again, which fences R first.
  await b.fence('org_a', 'm', 'i', 'req_R');
  t.notOk(b.isCurrent(first), 'the head held from before the fence is not current on the fencing node');
  t.ok(b.wasFenced('req_R'), 'the fencing node knows R was fenced (a late copy of R is then run as a retry)');
  t.notOk(b.wasFenced('req_other'), 'and no other request');
  for (let i = 0; i < 100 && !a.wasFenced('req_R'); i++) await sleep(10);
  t.ok(a.wasFenced('req_R'), 'so does the other node, once it applied the fence');
  const withR = (seq: number): TransitionRecord => ({ ...record(seq, seq - 1), requestId: 'req_R' });
  await t.rejects(
    a.commit(headAt(2, 1), first, [record(2, 1)]),
    SequenceConflictError,
    'an append of the old owner from before the fence is refused',
  );
  for (let i = 0; i < 100 && a.isCurrent(first); i++) await sleep(10);
  const fresh = a.getInstance('org_a', 'm', 'i') as InstanceHead;
  t.notOk(a.isCurrent(first), 'the old owner sees that its held head is stale');
  await t.rejects(a.commit(headAt(2, 1), fresh, [withR(2)]), RequestMovedError, 'nor may it commit R on the latest head');
  const byB = headAt(2, 1);
  await b.commit(byB, b.getInstance('org_a', 'm', 'i') as InstanceHead, [withR(2)]);
  t.equal(b.listTransitions('org_a', 'm', 'i', 0, 10).filter((r) => r.requestId === 'req_R').length, 1, 'the fencing node commits R, once');
  t.ok(b.isCurrent(byB), 'and its head is current');
});

t.test(
  'an entry stored after another that named the same position (what a 2.9 server lets through) changes no copy, and its writer is told',
  { skip },
  async (t) => {
    // (another node's writes, made by hand)
    const { a, b, nc, js } = await twoNodesAndRawWriter(t, 'rival');
    const subject = a.subjectOf('org_a', 'm', 'i');
    const partition = a.partitionOf('org_a', 'm', 'i');
    const applied = (store: typeof a) => store.appliedPositions()[partition] ?? 0;
    const settled = async (seq: number) => {
      for (let i = 0; i < 200 && (applied(a) < seq || applied(b) < seq); i++) await sleep(10);
    };
    const counts = (store: typeof a) => store.listTransitions('org_a', 'm', 'i', 0, 100).map((r) => r.event.count);
    const first = headAt(1, 0);
    await a.createInstance(first, [record(1, 0)]);
    const second = headAt(2, 1);
    await a.commit(second, first, [record(2, 1)]);

    // Another node's commit on the head before `second`, stored after it although it names the same
    // position (two appends that arrive together at a 2.9 server on a clustered stream): it must not count.
    const { logSeq: _, ...rivalHead } = headAt(2, 77);
    const rival = await js.publish(
      subject,
      JSON.stringify({ kind: 'commit', head: rivalHead, previousSeq: 1, history: [record(2, 77)], effects: {}, after: first.logSeq }),
    );
    await settled(rival.seq);
    for (const [store, node] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      t.same(
        counts(store),
        [0, 1],
        `node ${node}: the acknowledged commit stays in the history; the entry after it that named the same position is not applied`,
      );
      t.same(store.getInstance('org_a', 'm', 'i')?.context, { count: 1 }, `node ${node}: and the head is the acknowledged one`);
      t.equal(
        store.getInstance('org_a', 'm', 'i')?.logSeq,
        rival.seq,
        `node ${node}: at the log position of the last entry, which the next append names`,
      );
    }
    t.notOk(a.isCurrent(second), "the owner's held head is not current: it reloads the copy's, at the new position");

    // b's append is stored right after another node's that named the same position, as if the server
    // had not checked: b is told it did not count (a conflict), and the other node's commit stands.
    const held = b.getInstance('org_a', 'm', 'i') as InstanceHead;
    const log = (b as unknown as { log: { js: JetStreamClient } }).log;
    const publish = log.js.publish.bind(log.js);
    log.js.publish = async (subj, payload, options) => {
      const { logSeq: _seq, ...otherHead } = headAt(3, 50);
      await js.publish(
        subject,
        JSON.stringify({ kind: 'commit', head: otherHead, previousSeq: 2, history: [record(3, 50)], effects: {}, after: held.logSeq }),
      );
      return publish(subj, payload, { headers: options?.headers });
    };
    await t.rejects(
      b.commit(headAt(3, 2), held, [record(3, 2)]),
      SequenceConflictError,
      'an append stored after a rival that named the same position does not count: the writer gets a conflict',
    );
    log.js.publish = publish;
    const last = await (await jetstreamManager(nc)).streams.getMessage('STATEHOLD_c_TX', { last_by_subj: subject });
    await settled(last?.seq ?? 0);
    for (const [store, node] of [
      [a, 'a'],
      [b, 'b'],
    ] as const)
      t.same(counts(store), [0, 1, 50], `node ${node}: the rival's commit counts, b's does not`);

    // The writer runs the request again on the reloaded head: it goes through, and every copy agrees.
    const reloaded = b.getInstance('org_a', 'm', 'i') as InstanceHead;
    const fourth = headAt(4, 51);
    await b.commit(fourth, reloaded, [record(4, 51)]);
    await settled(fourth.logSeq ?? 0);
    for (const [store, node] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      t.same(counts(store), [0, 1, 50, 51], `node ${node}: the history after the retry`);
      t.same(store.getInstance('org_a', 'm', 'i')?.context, { count: 51 }, `node ${node}: and the head`);
    }
  },
);

t.test(
  "an entry that names a position the copy holds another instance's message at (a diverged replica) counts, when no entry of its instance came between",
  { skip },
  async (t) => {
    // A 2.9.10 stream's replicas can differ after a cut of the leader's routes: at the sequence of an
    // instance's fence one replica held another instance's commit, and the commit after the fence, which
    // names it, was acknowledged (the leader's replica had the fence). A node following that replica must
    // still count it: nothing of the instance came between its last entry there and that commit.
    const { a, b, js } = await twoNodesAndRawWriter(t, 'replica');
    const first = headAt(1, 0);
    await a.createInstance(first, [record(1, 0)]);
    // (what stands at the fence's sequence in this replica: another instance's entry)
    const { logSeq: _j, ...other } = { ...headAt(1, 5), name: 'j' };
    const elsewhere = await js.publish(
      a.subjectOf('org_a', 'm', 'j'),
      JSON.stringify({ kind: 'create', head: other, history: [record(1, 5)], effects: {}, after: 0 }),
    );
    const { logSeq: _i, ...next } = headAt(2, 1);
    const named = await js.publish(
      a.subjectOf('org_a', 'm', 'i'),
      JSON.stringify({ kind: 'commit', head: next, previousSeq: 1, history: [record(2, 1)], effects: {}, after: elsewhere.seq }),
    );
    const partition = a.partitionOf('org_a', 'm', 'i');
    for (let i = 0; i < 200 && [a, b].some((store) => (store.appliedPositions()[partition] ?? 0) < named.seq); i++) await sleep(10);
    for (const [store, node] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      t.same(
        store.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
        [0, 1],
        `node ${node}: the commit is in the history`,
      );
      t.same(store.getInstance('org_a', 'm', 'i')?.context, { count: 1 }, `node ${node}: and its head is the instance's`);
      t.equal(store.getInstance('org_a', 'm', 'i')?.logSeq, named.seq, `node ${node}: at its position`);
    }
    // A later entry naming a position before the commit (a stale writer's) still does not count.
    const { logSeq: _s, ...stale } = headAt(2, 99);
    const late = await js.publish(
      a.subjectOf('org_a', 'm', 'i'),
      JSON.stringify({ kind: 'commit', head: stale, previousSeq: 1, history: [record(2, 99)], effects: {}, after: elsewhere.seq }),
    );
    for (let i = 0; i < 200 && [a, b].some((store) => (store.appliedPositions()[partition] ?? 0) < late.seq); i++) await sleep(10);
    for (const [store, node] of [
      [a, 'a'],
      [b, 'b'],
    ] as const)
      t.same(store.getInstance('org_a', 'm', 'i')?.context, { count: 1 }, `node ${node}: a stale entry after it changes nothing`);
  },
);

t.test(
  "entries missing from the replica a copy follows are read from the log's leader: the history keeps their records",
  { skip },
  async (t) => {
    // A 2.9.10 stream's replicas can differ after a cut of the leader's routes: the replica a node's
    // consumer reads can lack an instance's entry that the leader holds (an event answered 503 whose
    // append was stored after all, an instance's create). The entries after it name it, count, and
    // were applied without its record. Here the replica is a stream of its own on another nats-server,
    // which the copy follows, and the log it asks is the "leader's".
    const { store, nc, leaderNc, log } = await leaderAndReplica(t);
    const publishTo = (js: JetStreamClient, name: string, entry: object) =>
      js.publish(log.subjectOf('org_a', 'm', name), JSON.stringify(entry)).then((ack) => ack.seq);
    const entry = logEntry;
    const truth = [
      entry('create', 'i', 1, 0, 0),
      entry('commit', 'i', 2, 1, 1),
      entry('commit', 'i', 3, 2, 2),
      entry('create', 'k', 1, 10, 0),
      entry('commit', 'k', 2, 11, 4),
    ];
    // (the replica: another instance's entries where the leader has i's second and k's create)
    const diverged = [truth[0]!, entry('create', 'j', 1, 5, 0), truth[2]!, entry('commit', 'j', 2, 6, 2), truth[4]!];
    for (const [js, entries] of [
      [jetstream(leaderNc), truth],
      [jetstream(nc), diverged],
    ] as const)
      for (const [index, e] of entries.entries()) t.equal(await publishTo(js, e.head.name, e), index + 1);

    // The leader's first answer does not come (JetStream briefly unavailable as a paused server resumed):
    // the entry that names the missing one must not be applied without it meanwhile.
    let unanswered = 1;
    const flakyLog = failingWhile(log, 'get', () => unanswered-- > 0);
    const notes: string[] = [];
    const errors: string[] = [];
    const copy = new LogInstanceStore(store.instances, flakyLog, (message, error) => errors.push(`${message}: ${String(error)}`), {
      nodeId: 'a',
      note: (message) => notes.push(message),
    });
    copy.own(nc, new Set(Array.from({ length: log.partitions }, (_, partition) => partition)), () => 1);
    await copy.allReady();
    t.teardown(() => copy.stopFollowing());
    t.match(errors, [
      /could not apply TX log entry \d+ .*following again from it: Error: could not read entry \d+ of instance .*temporarily unavailable/,
    ]);

    t.same(
      copy.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
      [0, 1, 2],
      "the record of i's entry the replica lacked is in the history",
    );
    t.same(copy.getInstance('org_a', 'm', 'i')?.context, { count: 2 });
    t.equal(copy.getInstance('org_a', 'm', 'i')?.logSeq, 3);
    t.same(
      copy.listTransitions('org_a', 'm', 'k', 0, 10).map((r) => r.event.count),
      [10, 11],
      'an instance whose create the replica lacked exists, with its whole history',
    );
    t.equal(copy.getInstance('org_a', 'm', 'k')?.logSeq, 5);
    t.equal(notes.length, 2, 'each entry read from the leader is told');
    t.match(notes.sort(), [/^entry 2 of instance org_a\/m\/i was missing/, /^entry 4 of instance org_a\/m\/k was missing/]);
  },
);

/** A copy of every partition following the replica (`nc`), asking `log`, whose applied position of i's partition reached `seq`. */
const copyFollowing = async (t: Test, parts: Awaited<ReturnType<typeof leaderAndReplica>>, seq: number) => {
  const { store, nc, log } = parts;
  const notes: string[] = [];
  const copy = new LogInstanceStore(store.instances, log, (message, error) => t.fail(`${message}: ${String(error)}`), {
    nodeId: 'a',
    note: (message) => notes.push(message),
  });
  copy.own(nc, new Set(Array.from({ length: log.partitions }, (_, partition) => partition)), () => 1);
  t.teardown(() => copy.stopFollowing());
  const partition = copy.partitionOf('org_a', 'm', 'i');
  for (let i = 0; i < 200 && (copy.appliedPositions()[partition] ?? 0) < seq; i++) await sleep(10);
  return { copy, notes };
};

/** The copy holds i as the log has it (count 1 at position 2, its history 0 and 1), and told what it mended. */
const holdsTheLogs = (t: Test, copy: LogInstanceStore, notes: string[], told: RegExp, at = 2) => {
  const head = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
  t.same(head.context, { count: 1 }, "the copy holds the log's head");
  t.equal(head.logSeq, at, 'at its position');
  t.same(
    copy.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
    [0, 1],
    "and the log's history",
  );
  t.match(notes, [told]);
};

const REBUILT =
  /instance org_a\/m\/i: this copy held an entry at 3 the log does not have \(its last is 2\); rebuilt from the log's 2 entries/;
const FILLED =
  /instance org_a\/m\/i: this copy's replica of the log lacked its 1 last entries \(after 1, to 2\); read from the log's leader/;

/**
 * A copy that applied an entry the log never committed. A 2.9.10 server that led the stream and was
 * paused kept messages its quorum never took, and a node whose consumer sat on it applied one (an event
 * answered 503): its copy named that position in every later append, which the log refused (409 for
 * good), and its reads showed the entry. Here the replica the copy follows is a stream of its own on
 * another nats-server, holding such an entry at 3, where the log holds another instance's create.
 */
const copyAheadOfTheLog = async (t: Test, logAsked = (log: JetStreamTransitionLog) => log, pastTheEnd = false) => {
  const parts = await leaderAndReplica(t);
  const { nc, leaderNc, log } = parts;
  const entry = (kind: 'create' | 'commit', seq: number, count: number, after: number) => {
    const { logSeq: _seq, ...head } = headAt(seq, count);
    return { kind, head, history: [record(seq, count)], effects: {}, after };
  };
  const committed = [entry('create', 1, 0, 0), entry('commit', 2, 1, 1)];
  for (const [js, entries] of [
    [jetstream(leaderNc), committed],
    [jetstream(nc), [...committed, entry('commit', 3, 99, 2)]],
  ] as const)
    for (const e of entries) await js.publish(log.subjectOf('org_a', 'm', 'i'), JSON.stringify(e));
  const { logSeq: _other, ...other } = { ...headAt(1, 5), name: 'j' };
  // (past the end: the log holds nothing at the position of the copy's last entry)
  if (!pastTheEnd)
    await jetstream(leaderNc).publish(
      log.subjectOf('org_a', 'm', 'j'),
      JSON.stringify({ kind: 'create', head: other, history: [record(1, 5)], effects: {}, after: 0 }),
    );

  const { copy, notes } = await copyFollowing(t, { ...parts, log: logAsked(log) }, 3);
  const phantom = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
  t.same(phantom.context, { count: 99 }, 'the copy applied the entry the log does not have');
  return { copy, phantom, notes };
};

t.test(
  "a copy that applied an entry the log never committed is rebuilt from the log's leader when the log refuses its next append",
  { skip },
  async (t) => {
    const { copy, phantom, notes } = await copyAheadOfTheLog(t);
    await t.rejects(
      copy.commit({ ...headAt(4, 100), logSeq: undefined }, phantom, [record(4, 100)]),
      SequenceConflictError,
      'the append after it is refused',
    );
    holdsTheLogs(t, copy, notes, REBUILT);
  },
);

t.test(
  'a read of a copy that applied an entry the log never committed does not show it: the read barrier rebuilds it',
  { skip },
  async (t) => {
    const { copy, phantom, notes } = await copyAheadOfTheLog(t);
    t.equal(copy.isCurrent(phantom), true, 'before the read, the head held is the latest the copy applied');
    await copy.caughtUp('org_a', 'm', 'i');
    holdsTheLogs(t, copy, notes, REBUILT);
    t.equal(copy.isCurrent(phantom), false, 'a head held in memory at the entry the log never committed is stale (its actor reloads)');
    t.equal(copy.isCurrent(copy.getInstance('org_a', 'm', 'i') as InstanceHead), true, 'the rebuilt head is current');
    await copy.caughtUp('org_a', 'm', 'i');
    t.equal(notes.length, 1, 'a read of a copy that agrees with the log rebuilds nothing');
  },
);

/**
 * A copy whose replica lacks an instance's last entry (another instance's message at its sequence):
 * no later entry names it, so the follower never reads it from the leader, and every append named the
 * copy's older position (refused: 409 for good) while reads showed the older state.
 */
const copyBehindTheLog = async (t: Test) => {
  const parts = await leaderAndReplica(t);
  const { nc, leaderNc, log } = parts;
  const entry = logEntry;
  // (the other instance in i's partition: the partition's follower reads only its own subjects)
  const other = Array.from({ length: 1000 }, (_, n) => `o${n}`).find(
    (name) => log.partitionOf('org_a', 'm', name) === log.partitionOf('org_a', 'm', 'i'),
  ) as string;
  for (const [js, entries] of [
    [jetstream(leaderNc), [entry('create', 'i', 1, 0, 0), entry('commit', 'i', 2, 1, 1)]],
    [jetstream(nc), [entry('create', 'i', 1, 0, 0), entry('create', other, 1, 5, 0)]],
  ] as const)
    for (const e of entries) await js.publish(log.subjectOf('org_a', 'm', e.head.name), JSON.stringify(e));
  const { copy, notes } = await copyFollowing(t, parts, 2);
  const stale = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
  t.equal(stale.logSeq, 1, "the copy lacks the log's last entry of the instance");
  return { copy, stale, notes };
};

t.test("a read of a copy whose replica lacks the instance's last entry shows it: read from the log's leader", { skip }, async (t) => {
  const { copy, stale, notes } = await copyBehindTheLog(t);
  await copy.caughtUp('org_a', 'm', 'i');
  holdsTheLogs(t, copy, notes, FILLED);
  t.equal(copy.isCurrent(stale), false, 'the older head held in memory is stale (its actor reloads)');
  await copy.caughtUp('org_a', 'm', 'i');
  t.equal(notes.length, 1, 'once');
});

t.test(
  "an append refused because the copy's replica lacks the instance's last entry mends the copy: the next names the log's",
  { skip },
  async (t) => {
    const { copy, stale, notes } = await copyBehindTheLog(t);
    await t.rejects(
      copy.commit({ ...headAt(3, 100), logSeq: undefined }, stale, [record(3, 100)]),
      SequenceConflictError,
      'the append after the older position is refused',
    );
    holdsTheLogs(t, copy, notes, FILLED);
  },
);

t.test(
  "an entry the log's leader counts that the copy does not (its replica holds a phantom of the instance between) rebuilds the instance from the leader",
  { skip },
  async (t) => {
    // A replica that led the stream and was cut off keeps its owner's appends the quorum never took;
    // once the copy applied one, the committed entries after it named a position before it, did not
    // count on the copy, and their records were lost (acknowledged events missing from every history).
    const parts = await leaderAndReplica(t);
    const { nc, leaderNc, log } = parts;
    const other = Array.from({ length: 1000 }, (_, n) => `o${n}`).find(
      (name) => log.partitionOf('org_a', 'm', name) === log.partitionOf('org_a', 'm', 'i'),
    ) as string;
    const entry = logEntry;
    for (const [js, entries] of [
      [jetstream(leaderNc), [entry('create', 'i', 1, 0, 0), entry('create', other, 1, 5, 0), entry('commit', 'i', 2, 1, 1)]],
      [jetstream(nc), [entry('create', 'i', 1, 0, 0), entry('commit', 'i', 2, 99, 1), entry('commit', 'i', 2, 1, 1)]],
    ] as const)
      for (const e of entries) await js.publish(log.subjectOf('org_a', 'm', e.head.name), JSON.stringify(e));
    const { copy, notes } = await copyFollowing(t, parts, 3);
    holdsTheLogs(
      t,
      copy,
      notes,
      /instance org_a\/m\/i: this copy held an entry the log's leader does not have between \(its position 2, the log's entry at 3 counts there\); rebuilt from the log's 2 entries/,
      3,
    );
  },
);

t.test(
  'an audit of the instances held mends the ones no read names: a create the replica lacked is filled in, one the log never committed dropped',
  { skip },
  async (t) => {
    // A 2.9.10 replica that diverged under a cut of its leader's routes lacked the create of an
    // instance made meanwhile through another node, with no later entry of it, and held the create of
    // one the log never took: lists and index queries, answered from the copy, missed the first and
    // showed the second until each was read (a partition probe: a create answered 200 in no node's list).
    const parts = await leaderAndReplica(t);
    const { nc, leaderNc, log } = parts;
    const entry = logEntry;
    const inPartitionOfI = Array.from({ length: 2000 }, (_, n) => `o${n}`).filter(
      (name) => log.partitionOf('org_a', 'm', name) === log.partitionOf('org_a', 'm', 'i'),
    );
    const [made, phantom] = inPartitionOfI as [string, string];
    const deleted = 'gone';
    for (const [js, entries] of [
      [
        jetstream(leaderNc),
        [
          entry('create', 'i', 1, 0, 0),
          entry('create', made, 1, 7, 0),
          entry('create', deleted, 1, 3, 0),
          { kind: 'delete', orgId: 'org_a', machine: 'm', name: deleted, after: 3 },
        ],
      ],
      [jetstream(nc), [entry('create', 'i', 1, 0, 0), entry('create', phantom, 1, 5, 0)]],
    ] as const)
      for (const e of entries) await js.publish(log.subjectOf('org_a', 'm', 'head' in e ? e.head.name : e.name), JSON.stringify(e));
    const { copy, notes } = await copyFollowing(t, parts, 2);
    const names = () => copy.listInstances('org_a', 'm', undefined, 10).map((head) => head.name);
    t.same(names().sort(), ['i', phantom].sort(), 'before: the copy lists the create the log never took, not the one it lacks');
    const held = copy.getInstance('org_a', 'm', phantom) as InstanceHead;

    t.equal(await copy.auditInstances(), 2, 'the audit mends two instances');
    t.same(names().sort(), ['i', made].sort(), 'after: the copy lists what the log holds');
    t.same(copy.getInstance('org_a', 'm', made)?.context, { count: 7 });
    t.same(
      copy.listTransitions('org_a', 'm', made, 0, 10).map((r) => r.event.count),
      [7],
      'with its history',
    );
    t.equal(copy.getInstance('org_a', 'm', phantom), undefined);
    t.equal(copy.isCurrent(held), false, 'a head held in memory of the dropped instance is stale (its actor reloads)');
    t.equal(copy.getInstance('org_a', 'm', deleted), undefined, 'a deleted instance is not made again');
    t.match(notes.sort(), [
      new RegExp(`^instance org_a/m/${made}: this copy's replica of the log lacked it \\(its last entry is at 2\\); read its 1 entries`),
      new RegExp(`^instance org_a/m/${phantom}: this copy held it \\(at 2\\) and the log has no entry of it; dropped`),
    ]);
    t.equal(await copy.auditInstances(), 0, 'an audit of a copy that agrees with the log mends nothing');
  },
);

t.test(
  'an audit mends an instance whose append failed without a refusal: an entry the log never committed, with none after it, is rebuilt away',
  { skip },
  async (t) => {
    // The cut-off owner's appends that the quorum never took stay in its server's replica (each retry
    // stored again), and its copy applied them; with no later entry of the instance, nothing revealed
    // them until the instance was read or written.
    let failing = 1;
    const { copy, phantom, notes } = await copyAheadOfTheLog(t, (log) => failingWhile(log, 'append', () => failing-- > 0));
    await t.rejects(copy.commit({ ...headAt(4, 100), logSeq: undefined }, phantom, [record(4, 100)]), /timeout/);
    t.same(copy.getInstance('org_a', 'm', 'i')?.context, { count: 99 }, 'before the audit the copy shows the entry');
    await copy.auditInstances();
    t.same(copy.getInstance('org_a', 'm', 'i')?.context, { count: 1 }, "after it, the log's head");
    t.same(
      copy.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
      [0, 1],
      "and the log's history",
    );
    t.match(
      notes.filter((note) => note.startsWith('instance org_a/m/i:')),
      [/^instance org_a\/m\/i: an append of it failed without a refusal; rebuilt from the log's 2 entries/],
    );
    t.equal(copy.isCurrent(phantom), false, 'the head held in memory is stale');
  },
);

t.test(
  'a fence the copy never applied, hidden by an entry the log never committed at the same sequence, still refuses the fenced request',
  { skip },
  async (t) => {
    // The cut-off owner appended an event of i while its server led the stream cut off (stored on that
    // replica at 3, never committed); meanwhile another node fenced a request to i and committed it, at
    // 3 and 4 on the log. The replica the copy follows then handed on the log's 4, which names 3: the
    // copy's position, so it counted, and the fence was never applied here. The request, delivered to
    // this node late, must not be committed a second time (a partition probe saw it twice in a history).
    const parts = await leaderAndReplica(t);
    const { nc, leaderNc, log } = parts;
    const entry = (kind: 'create' | 'commit', seq: number, count: number, after: number, requestId?: string) => {
      const { logSeq: _seq, ...head } = headAt(seq, count);
      return { kind, head, history: [{ ...record(seq, count), ...(requestId ? { requestId } : {}) }], effects: {}, after };
    };
    const committed = [entry('create', 1, 0, 0), entry('commit', 2, 1, 1)];
    const fence = { kind: 'fence', orgId: 'org_a', machine: 'm', name: 'i', requestId: 'req-late', by: 'b', after: 2 };
    const fenced = entry('commit', 3, 2, 3, 'req-late');
    for (const [js, entries] of [
      [jetstream(leaderNc), [...committed, fence, fenced]],
      [jetstream(nc), [...committed, entry('commit', 3, 99, 2)]],
    ] as const)
      for (const e of entries) await js.publish(log.subjectOf('org_a', 'm', 'i'), JSON.stringify(e));
    let failing = 1;
    const { copy } = await copyFollowing(t, { ...parts, log: failingWhile(log, 'append', () => failing-- > 0) }, 3);
    const phantom = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
    // (this node's own append of it failed without a refusal: what left the entry at 3 on its replica)
    await t.rejects(copy.commit({ ...headAt(4, 100), logSeq: undefined }, phantom, [record(4, 100)]), /timeout/);
    await jetstream(nc).publish(log.subjectOf('org_a', 'm', 'i'), JSON.stringify(fenced));
    for (let i = 0; i < 200 && copy.getInstance('org_a', 'm', 'i')?.logSeq !== 4; i++) await sleep(10);
    const held = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
    t.equal(held.logSeq, 4, "the copy applied the log's 4 on top of its own 3");
    t.equal(copy.wasFenced('req-late'), false, 'and never saw the fence');

    const late = [{ ...record(4, 3), requestId: 'req-late' }];
    const first = await copy.commit({ ...headAt(4, 3), logSeq: undefined }, held, late).catch((error: unknown) => error);
    t.type(first, SequenceConflictError, 'the first write rebuilds the instance from the log and is run again');
    const reloaded = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
    t.same(reloaded.context, { count: 2 }, "the copy holds the log's head");
    await t.rejects(
      copy.commit({ ...headAt(4, 3), logSeq: undefined }, reloaded, late),
      RequestMovedError,
      'run again, the fenced request is refused: the node that fenced it committed it',
    );
    t.equal(await log.lastSeq('org_a', 'm', 'i'), 4, 'nothing more in the log');
  },
);

t.test(
  'a list of a partition holding an instance whose append failed without a refusal mends it first; a 503 while the log cannot be read',
  { skip },
  async (t) => {
    // A create the log never committed, kept by the cut-off owner's replica and applied by its copy, was
    // listed through every node after a heal (the audit had not run yet: JetStream had no meta leader),
    // then read 404 and listed nowhere (a partition probe).
    let failing = 1;
    let unreadable = false;
    const { copy } = await copyAheadOfTheLog(t, (log) =>
      failingWhile(
        failingWhile(log, 'append', () => failing-- > 0),
        'lastSeq',
        () => unreadable,
      ),
    );
    const phantom = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
    await t.rejects(copy.commit({ ...headAt(4, 100), logSeq: undefined }, phantom, [record(4, 100)]), /timeout/);
    const partition = copy.partitionOf('org_a', 'm', 'i');
    unreadable = true;
    await t.rejects(
      copy.reads.listPart([partition], 'org_a', 'm', undefined, 10),
      { status: 503, code: 'unavailable', message: /cannot check against the cluster's log now/ },
      'not answered from a copy that may show what the log never took',
    );
    unreadable = false;
    const part = await copy.reads.listPart([partition], 'org_a', 'm', undefined, 10);
    t.same(
      part === 'moved' ? part : part.filter((head) => head.name === 'i').map((head) => head.context),
      [{ count: 1 }],
      "the list shows the log's head, not the entry it never committed",
    );
  },
);

t.test(
  "an entry that failed to apply holds back the instance's later ones: none moves the copy past it, and its record is kept",
  { skip },
  async (t) => {
    // A follower hands entries on without waiting; when one failed (its read from the log's leader, as
    // JetStream elected a leader), later entries of the instance ran anyway. One that named a position
    // past its own sequence (a replica that diverged numbers entries lower than the leader) counted at
    // once, moved the copy past the failed ones, and those were passed by when delivered again: their
    // records lost from every history (a partition probe, 2 runs of 25).
    const { store, nc, leaderNc, log } = await leaderAndReplica(t);
    const entry = logEntry;
    const other = Array.from({ length: 2000 }, (_, n) => `o${n}`).filter(
      (name) => log.partitionOf('org_a', 'm', name) === log.partitionOf('org_a', 'm', 'i'),
    ) as [string, string];
    const truth = [
      entry('create', 'i', 1, 0, 0),
      entry('commit', 'i', 2, 1, 1),
      entry('commit', 'i', 3, 2, 2),
      entry('create', other[1], 1, 9, 0),
      entry('commit', 'i', 4, 3, 3),
      entry('commit', 'i', 5, 4, 5),
    ];
    // (the replica: another instance's create where the leader has i's second entry, and not the leader's fourth)
    const diverged = [truth[0]!, entry('create', other[0], 1, 5, 0), truth[2]!, truth[4]!, truth[5]!];
    for (const [js, entries] of [
      [jetstream(leaderNc), truth],
      [jetstream(nc), diverged],
    ] as const)
      for (const e of entries) await js.publish(log.subjectOf('org_a', 'm', e.head.name), JSON.stringify(e));
    let unanswered = 2;
    const flakyLog = failingWhile(log, 'get', () => unanswered-- > 0);
    const copy = new LogInstanceStore(store.instances, flakyLog, () => undefined, { nodeId: 'a' });
    copy.own(nc, new Set(Array.from({ length: log.partitions }, (_, partition) => partition)), () => 1);
    t.teardown(() => copy.stopFollowing());
    const partition = copy.partitionOf('org_a', 'm', 'i');
    for (let i = 0; i < 300 && (copy.appliedPositions()[partition] ?? 0) < 5; i++) await sleep(10);
    t.same(
      copy.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
      [0, 1, 2, 3, 4],
      'every record of i, the ones whose entries failed first included',
    );
    t.same(copy.getInstance('org_a', 'm', 'i')?.context, { count: 4 });
  },
);

t.test(
  "a copy whose last entry lies past the log's end (a replica that diverged holds one message more) is rebuilt at the read barrier",
  { skip },
  async (t) => {
    // The cut-off leader's replica held one message more than the log, its copy's last entry of an
    // instance at a position the log does not have yet: every append named it and was refused, and the
    // read barrier did not mend it (it looked for another instance's entry there): 409 for good.
    const { copy, phantom, notes } = await copyAheadOfTheLog(t, undefined, true);
    await copy.caughtUp('org_a', 'm', 'i');
    holdsTheLogs(t, copy, notes, REBUILT);
    t.equal(copy.isCurrent(phantom), false, 'the head held in memory is stale');
  },
);

t.test(
  'a list or an index query of a partition whose entry failed to apply waits for it: it does not answer from the copy behind the log',
  { skip },
  async (t) => {
    // After a cut of the TX leader's routes, the cut-off owner's follower failed its applies for 20 s
    // (JetStream's API unavailable) while an index query through any node answered from its copy,
    // values several events old (a partition probe).
    const { store, nc, leaderNc, log } = await leaderAndReplica(t);
    const entry = logEntry;
    const other = Array.from({ length: 2000 }, (_, n) => `o${n}`).find(
      (name) => log.partitionOf('org_a', 'm', name) === log.partitionOf('org_a', 'm', 'i'),
    ) as string;
    const publish = async (entries: { leader: object[]; replica: object[] }) => {
      for (const [js, list] of [
        [jetstream(leaderNc), entries.leader],
        [jetstream(nc), entries.replica],
      ] as const)
        for (const e of list as Array<{ head: { name: string } }>)
          await js.publish(log.subjectOf('org_a', 'm', e.head.name), JSON.stringify(e));
    };
    await publish({ leader: [entry('create', 'i', 1, 0, 0)], replica: [entry('create', 'i', 1, 0, 0)] });
    let answering = false;
    const flakyLog = failingWhile(log, 'get', () => !answering);
    const copy = new LogInstanceStore(store.instances, flakyLog, () => undefined, { nodeId: 'a' });
    copy.own(nc, new Set(Array.from({ length: log.partitions }, (_, partition) => partition)), () => 1);
    t.teardown(() => copy.stopFollowing());
    const partition = copy.partitionOf('org_a', 'm', 'i');
    await copy.allReady();
    // (then, the copy caught up: the replica holds another instance's create where the leader has i's second entry)
    await publish({
      leader: [entry('commit', 'i', 2, 1, 1), entry('commit', 'i', 3, 2, 2)],
      replica: [entry('create', other, 1, 5, 0), entry('commit', 'i', 3, 2, 2)],
    });
    for (let i = 0; i < 200 && (copy.appliedPositions()[partition] ?? 0) < 2; i++) await sleep(10);
    await sleep(100);
    t.same(copy.getInstance('org_a', 'm', 'i')?.context, { count: 0 }, 'the copy is behind: the entry naming the one it lacks failed');
    const listed = copy.reads.listPart([partition], 'org_a', 'm', undefined, 10);
    const queried = copy.reads.queryPart([partition], { orgId: 'org_a', machine: 'm', index: 'x', limit: 10 } as never);
    await sleep(300);
    answering = true;
    const list = await listed;
    t.not(list, 'moved');
    t.same(
      (list as InstanceHead[]).find((head) => head.name === 'i')?.context,
      { count: 2 },
      "the list waited for the entry that failed: i's head as the log has it",
    );
    t.not(await queried, 'moved', 'so did the index query');
  },
);

/** Publishes `leader` to the log's stream and `replica` to the replica's, each entry on its instance's subject. */
const publishBoth = async (parts: Awaited<ReturnType<typeof leaderAndReplica>>, leader: object[], replica: object[]) => {
  for (const [js, entries] of [
    [jetstream(parts.leaderNc), leader],
    [jetstream(parts.nc), replica],
  ] as const)
    for (const e of entries as Array<{ head: { name: string } }>)
      await js.publish(parts.log.subjectOf('org_a', 'm', e.head.name), JSON.stringify(e));
};

t.test(
  'an entry naming a position at or past its own sequence takes the instance from the leader: the entries it names are not lost',
  { skip },
  async (t) => {
    // A replica that diverged numbered entries lower than the log and lacked two of an instance's: the
    // next entry named a position past its own sequence, was not looked up, counted, and the two
    // acknowledged events were in no history (a partition probe).
    const parts = await leaderAndReplica(t);
    const commits = [
      logEntry('create', 'i', 1, 0, 0),
      logEntry('commit', 'i', 2, 1, 1),
      logEntry('commit', 'i', 3, 2, 2),
      logEntry('commit', 'i', 4, 3, 3),
    ];
    await publishBoth(parts, commits, [commits[0]!, commits[3]!]);
    const { copy } = await copyFollowing(t, parts, 2);
    t.same(
      copy.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
      [0, 1, 2, 3],
      'every record, the ones the replica lacked included',
    );
    t.equal(copy.getInstance('org_a', 'm', 'i')?.logSeq, 4, "at the log's position");
  },
);

t.test(
  "an entry the copy holds, delivered again at a later sequence by a replica that numbers entries otherwise, does not move the copy's position",
  { skip },
  async (t) => {
    // The cut-off leader's replica held one message more: each of the owner's entries came back one
    // later, was taken for an entry that does not count, and moved the copy's position past the log's;
    // the owner's next entry, acknowledged at that sequence, was then passed by as held (a partition probe:
    // an event answered 200 in no history).
    const parts = await leaderAndReplica(t);
    const commits = [logEntry('create', 'i', 1, 0, 0), logEntry('commit', 'i', 2, 1, 1)];
    await publishBoth(parts, commits, [commits[0]!, commits[1]!, commits[1]!]);
    const { copy } = await copyFollowing(t, parts, 3);
    const head = copy.getInstance('org_a', 'm', 'i') as InstanceHead;
    t.equal(head.logSeq, 2, "the copy's position stays the log's");
    await copy.commit({ ...headAt(3, 2), logSeq: undefined }, head, [record(3, 2)]);
    t.same(
      copy.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => r.event.count),
      [0, 1, 2],
      'the next commit names it and is taken',
    );
  },
);
