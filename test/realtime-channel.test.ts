import t from 'tap';
import { MAX_QUEUED_NEWS, type RtPeer } from '../src/api/realtime/instance-channel.js';
import { newSession, RealtimeHub, defaultRealtimeLimits } from '../src/api/realtime/realtime-hub.js';
import { InProcessUpdateBus, type InstanceUpdate } from '../src/runtime/update-bus.js';
import type { InstanceHead } from '../src/store/instance-store.js';

/**
 * The hub and its channels without sockets or a sandbox: a fake runtime whose authorizer answers
 * after random delays, fake peers that record what they get, and uWS's topic semantics modelled.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class Topics {
  readonly members = new Map<string, Set<FakePeer>>();
  publish(topic: string, text: string): void {
    for (const peer of this.members.get(topic) ?? []) peer.frames.push(JSON.parse(text));
  }
}

let ids = 0;
class FakePeer implements RtPeer {
  readonly id = ++ids;
  open = true;
  backlogged = false;
  readonly frames: any[] = [];
  constructor(private readonly topics: Topics) {}
  send(text: string): void {
    this.frames.push(JSON.parse(text));
  }
  subscribe(topic: string): void {
    let members = this.topics.members.get(topic);
    if (!members) this.topics.members.set(topic, (members = new Set()));
    members.add(this);
  }
  unsubscribe(topic: string): void {
    this.topics.members.get(topic)?.delete(this);
  }
}

const head = (seq: number, count: number): InstanceHead =>
  ({
    orgId: 'org_a',
    machine: 'm',
    name: 'i',
    versionId: 'ver_1',
    seq,
    ts: 1_000 + seq,
    state: 'on',
    context: { count, public: { count } },
    tags: [],
    done: false,
  }) as unknown as InstanceHead;

const update = (seq: number, count: number): InstanceUpdate => ({ kind: 'update', ...head(seq, count) }) as InstanceUpdate;

/** When set, subscribes wait for it before they are admitted (the local copy catching up). */
let gate: Promise<void> | undefined;

const setUp = (allow: (context: any, auth: any) => boolean = () => true) => {
  const bus = new InProcessUpdateBus();
  const topics = new Topics();
  let current: InstanceHead | undefined = head(1, 0);
  const reads: string[] = [];
  let keyGone = false;
  const deleteKey = () => {
    keyGone = true;
  };
  const hub = new RealtimeHub({
    runtime: {
      allowsRead: async (view, authContexts) => {
        await sleep(Math.random() * 5);
        return authContexts.map((authContext) => allow(view.context, authContext));
      },
      countRead: (orgId) => reads.push(orgId),
    },
    bus,
    fanout: topics,
    authenticate: (token) => ({ orgId: 'org_a', authContext: { sub: token }, keyId: token.startsWith('gone') ? 'sbk_gone' : 'sbk_kept' }),
    keyExists: (keyId) => keyId !== 'sbk_gone' || !keyGone,
    head: async () => {
      await (gate ?? sleep(Math.random() * 3));
      return current;
    },
    limits: defaultRealtimeLimits,
    logError: (message, error) => {
      throw new Error(`${message}: ${String(error)}`);
    },
  });
  const commit = (seq: number, count: number) => {
    current = head(seq, count);
    bus.publish(update(seq, count));
  };
  const connect = (token: string) => {
    const peer = new FakePeer(topics);
    return { peer, session: newSession(peer, token, undefined, defaultRealtimeLimits) };
  };
  const subscribe = (who: { session: ReturnType<typeof newSession> }, requestId: string) =>
    hub.handle(who.session, JSON.stringify({ type: 'subscribe-to-instance', machineName: 'm', machineInstanceName: 'i', requestId }));
  return { bus, hub, commit, connect, subscribe, reads, topics, deleteKey };
};

const waitFor = async (check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await sleep(10);
};

const counts = (peer: FakePeer) => peer.frames.filter((f) => f.type === 'instance-update').map((f) => f.publicContext.count);

t.test('subscribes racing commits: every subscriber gets a gapless, duplicate-free, ordered tail', async (t) => {
  const { commit, connect, subscribe, hub, bus } = setUp();
  const peers = [];
  for (let seq = 2; seq <= 60; seq++) {
    if (seq % 6 === 0) {
      const who = connect(`user-${seq % 3}`);
      subscribe(who, `r${seq}`);
      peers.push(who.peer);
    }
    commit(seq, seq - 1);
    await sleep(Math.random() * 3);
  }
  // (the authorizer takes up to 5 ms an update, one update after another: wait for the last, bounded)
  for (let i = 0; i < 500 && !peers.every((peer) => counts(peer).at(-1) === 59); i++) await sleep(10);
  for (const peer of peers) {
    const seen = counts(peer);
    t.ok(seen.length > 0);
    const first = seen[0] as number;
    t.same(
      seen,
      Array.from({ length: 60 - first }, (_, i) => first + i),
      `peer ${peer.id} from ${first} to 59, each once`,
    );
  }
  t.ok(bus.listenedInstances === 1 && hub.channelCount === 1, 'one channel for the instance, one listener on the bus');
});

t.test('a channel is let go once its last subscriber leaves', async (t) => {
  const { connect, subscribe, hub, bus } = setUp();
  const a = connect('a');
  const b = connect('b');
  subscribe(a, 'x');
  subscribe(b, 'y');
  await waitFor(() => counts(a.peer).length === 1 && counts(b.peer).length === 1);
  t.equal(hub.channelCount, 1);
  hub.handle(a.session, JSON.stringify({ type: 'unsubscribe-from-instance', machineName: 'm', machineInstanceName: 'i', requestId: 'x' }));
  t.equal(hub.channelCount, 1, 'b is still there');
  hub.closed(b.session);
  t.equal(hub.channelCount, 0);
  t.equal(bus.listenedInstances, 0, 'no listener left on the bus');
});

t.test('revocation stops one auth group and not the other', async (t) => {
  const { commit, connect, subscribe } = setUp((context, auth) => auth.sub === 'owner' || context.count < 3);
  const owner = connect('owner');
  const guest = connect('guest');
  subscribe(owner, 'o');
  subscribe(guest, 'g');
  await waitFor(() => counts(owner.peer).length === 1 && counts(guest.peer).length === 1);
  for (let seq = 2; seq <= 6; seq++) commit(seq, seq - 1);
  for (let i = 0; i < 500 && counts(owner.peer).at(-1) !== 5; i++) await sleep(10);
  t.same(counts(owner.peer), [0, 1, 2, 3, 4, 5]);
  t.same(counts(guest.peer), [0, 1, 2]);
  t.match(guest.peer.frames.at(-1), { type: 'error', requestId: 'g', status: 403, code: 'rejected-by-machine-authorizer' });
  t.equal(guest.session.subscriptions.size, 0, 'the refused subscription is gone from its socket');
});

t.test('a deleted key ends the subscriptions of sockets signed in with it, each with 403, and no others', async (t) => {
  const { hub, commit, connect, subscribe, deleteKey } = setUp();
  const gone = connect('gone-user');
  const kept = connect('kept-user');
  subscribe(gone, 'g1');
  subscribe(gone, 'g2');
  subscribe(kept, 'k1');
  await waitFor(() => counts(gone.peer).length === 2 && counts(kept.peer).length === 1);
  t.equal(hub.dropRevoked(), 0, 'nothing ends while the key exists');
  deleteKey();
  t.equal(hub.dropRevoked(), 2, 'both subscriptions of the deleted key end');
  const errors = gone.peer.frames.filter((f) => f.type === 'error');
  t.same(errors.map((f) => [f.requestId, f.status, f.code]).sort(), [
    ['g1', 403, 'unauthorized'],
    ['g2', 403, 'unauthorized'],
  ]);
  commit(2, 1);
  await waitFor(() => counts(kept.peer).length === 2);
  t.same(counts(gone.peer), [0, 0], 'no update after the key went');
  t.equal(gone.session.subscriptions.size, 0);
  t.equal(hub.dropRevoked(), 0, 'ended once');
});

t.test('a subscribe waits for the local copy; unsubscribed or closed meanwhile, it is never admitted', async (t) => {
  const { hub, connect, subscribe } = setUp();
  let open!: () => void;
  gate = new Promise<void>((resolve) => (open = resolve));
  const a = connect('a');
  const b = connect('b');
  subscribe(a, 'x');
  subscribe(a, 'y');
  subscribe(b, 'z');
  subscribe(a, 'x');
  hub.handle(a.session, JSON.stringify({ type: 'unsubscribe-from-instance', machineName: 'm', machineInstanceName: 'i', requestId: 'x' }));
  hub.closed(b.session);
  open();
  gate = undefined;
  await waitFor(() => counts(a.peer).length === 1);
  await sleep(20);
  t.same(
    a.peer.frames.map((f) => (f.type === 'error' ? ['error', f.requestId, f.status] : ['update', f.publicContext.count])),
    [
      ['error', 'x', 400],
      ['update', 0],
    ],
    'the repeated requestId refused at once; x unsubscribed while waiting; y admitted',
  );
  t.same([...a.session.subscriptions.keys()], ['y']);
  t.equal(b.peer.frames.length, 0, 'nothing for the closed socket');
  t.equal(hub.channelCount, 1);
});

t.test('a backlog beyond the bound drops the oldest updates, never the latest', async (t) => {
  const { commit, connect, subscribe } = setUp();
  const who = connect('a');
  subscribe(who, 'r');
  await waitFor(() => counts(who.peer).length === 1);
  const last = MAX_QUEUED_NEWS * 3;
  for (let seq = 2; seq <= last; seq++) commit(seq, seq - 1);
  await sleep(Math.max(500, last * 3));
  const seen = counts(who.peer);
  t.equal(seen.at(-1), last - 1, 'the latest state arrives');
  t.ok(
    seen.every((count, i) => i === 0 || count > (seen[i - 1] as number)),
    'in order',
  );
  t.ok(seen.length <= MAX_QUEUED_NEWS + 3, `at most the bound (+ what was in hand): ${seen.length}`);
});

t.test('deletion ends every subscription with 404', async (t) => {
  const { bus, connect, subscribe, hub } = setUp();
  const a = connect('a');
  subscribe(a, 'r1');
  subscribe(a, 'r2');
  await waitFor(() => counts(a.peer).length === 2);
  bus.publish({ kind: 'deleted', orgId: 'org_a', machine: 'm', name: 'i' });
  await waitFor(() => a.peer.frames.filter((f) => f.type === 'error').length === 2);
  // (subscribes wait for the copy to catch up, so they may be admitted, and refused, in either order)
  t.same(
    a.peer.frames
      .filter((f) => f.type === 'error')
      .map((f) => [f.requestId, f.status])
      .sort(),
    [
      ['r1', 404],
      ['r2', 404],
    ],
  );
  t.equal(hub.channelCount, 0);
});

t.test('a socket that leaves its output unread gets no answers to its own frames, and its subscribes still work', async (t) => {
  const { connect, subscribe, hub } = setUp();
  const reader = connect('reader');
  hub.handle(reader.session, 'not json');
  t.match(reader.peer.frames, [{ type: 'error', status: 400, code: 'invalid-parameter' }], 'answered while it reads');
  const stalled = connect('stalled');
  stalled.peer.backlogged = true;
  for (let i = 0; i < 100; i++) hub.handle(stalled.session, 'not json');
  subscribe(stalled, 's1');
  subscribe(stalled, 's1');
  await waitFor(() => stalled.peer.frames.length > 0);
  t.same(
    stalled.peer.frames.map((f) => f.type),
    ['instance-update'],
    'no error for the bad frames or the reused requestId; the subscription itself goes on',
  );
});
