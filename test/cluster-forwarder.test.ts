import t, { type Test } from 'tap';
import { partitionOf } from '../src/domain/partitions.js';
import { Forwarder, type OwnerSide } from '../src/cluster/forwarder.js';
import { ownerOf } from '../src/cluster/rendezvous.js';
import {
  COMMAND_PROTOCOL,
  decodeCommand,
  decodeReply,
  encodeCommand,
  encodeReply,
  type InstanceState,
  stateOf,
} from '../src/cluster/instance-commands.js';
import { InstanceNotFoundError, ServiceError } from '../src/domain/errors.js';
import { pack, unpack } from 'msgpackr';
import { connectTo, type NatsServers, natsMissing, startNats } from './helpers/nats.js';

/** Ownership as a cluster node has it: partitions by rendezvous over the members; no list reads in these tests. */
const byPartition = (members: () => string[]) => ({
  partitions: {
    count: 16,
    of: (orgId: string, machine: string, name: string) => partitionOf(orgId, machine, name, 16),
    owner: (partition: number) => ownerOf(`partition/${partition}`, members()),
  },
  reads: {
    head: () => undefined,
    history: () => [],
    listPart: async () => 'moved' as const,
    queryPart: async () => 'moved' as const,
  },
});

/** Requests run on the instance's owner: locally, through NATS, with typed errors, across a move. */

const skip = natsMissing();

/** An owner side that records what ran on it and answers a state naming itself (what else an owner's head holds stays there). */
const requestIds: string[] = [];
const ownerSide = (id: string, ran: string[]): OwnerSide => {
  const head = (name: string): InstanceState =>
    ({ state: id, context: { name }, tags: [], done: false, ts: 1, snapshot: '{"big":true}', pendingTimers: [] }) as InstanceState;
  return {
    create: async (request) => (ran.push(`create ${request.name}`), head(request.name)),
    read: async (_o, _m, name) => (ran.push(`read ${name}`), head(name)),
    send: async (_o, _m, name, event, _auth, requestId) => {
      ran.push(`send ${name} ${event.type}`);
      requestIds.push(`${id} ${requestId}`);
      if (event.type === 'HANG') await new Promise(() => {});
      if (event.type === 'BAD') throw new ServiceError(403, 'rejected-by-machine-authorizer', 'no', undefined);
      if (event.type === 'BUG') throw new Error('a bug');
      return head(name);
    },
    setStatus: async () => undefined,
    delete: async () => true,
    fireTimers: async () => 'fired',
    receive: async () => undefined,
    // (no test asks these of this owner side as it is: the gate test gives its own)
    setTargetVersion: async () => {
      throw new Error('setTargetVersion: not expected here');
    },
    whileDeletingMachine: async () => {
      throw new Error('whileDeletingMachine: not expected here');
    },
    gateMachine: () => {
      throw new Error('gateMachine: not expected here');
    },
  };
};

/** A started Forwarder for node `id` on `nats`, over `owner`, with the members `members()` names; stopped when `t` ends. */
const startForwarder = async (
  t: Test,
  nats: NatsServers,
  id: string,
  owner: OwnerSide,
  members: () => string[],
  onError: (message: string) => void = () => undefined,
  more: Partial<Pick<ConstructorParameters<typeof Forwarder>[2], 'moveWindowMs' | 'onWrite' | 'foundAfterCatchUp' | 'reads'>> = {},
): Promise<Forwarder> => {
  const nc = await connectTo(nats, id);
  const forwarder = new Forwarder(nc, owner, {
    cluster: 'c',
    nodeId: id,
    members,
    ...byPartition(members),
    timeoutMs: 2_000,
    onError,
    ...more,
  });
  forwarder.start();
  await nc.flush();
  t.teardown(async () => {
    forwarder.stop();
    await nc.close();
  });
  return forwarder;
};

/** An instance name of machine `m` of org_a whose owner is `owner` in `forwarder`'s view. */
const nameOwnedBy = (forwarder: Forwarder, owner: string): string =>
  Array.from({ length: 40 }, (_, i) => `i${i}`).find((name) => forwarder.ownerOf('org_a', 'm', name) === owner) as string;

t.test("each request runs once, on its owner; errors keep their status and code; a departed owner's keys move", { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  let members = ['n1', 'n2'];
  const ran: { n1: string[]; n2: string[] } = { n1: [], n2: [] };
  const errors: string[] = [];
  const make = (id: 'n1' | 'n2') =>
    startForwarder(
      t,
      nats,
      id,
      ownerSide(id, ran[id]),
      () => members,
      (m) => errors.push(m),
    );
  const n1 = await make('n1');
  const n2 = await make('n2');
  const names = Array.from({ length: 40 }, (_, i) => `i${i}`);
  for (const name of names) {
    const head = await n1.send('org_a', 'm', name, { type: 'GO' }, {});
    t.equal(head.state, ownerOf(`partition/${partitionOf('org_a', 'm', name, 16)}`, members), `${name} ran on its owner`);
    t.same(Object.keys(head).sort(), ['context', 'done', 'state', 'tags', 'ts'], 'answered with what the API shows only');
  }
  t.equal(ran.n1.length + ran.n2.length, 40, 'each once');
  t.ok(ran.n1.length > 5 && ran.n2.length > 5, 'both nodes own some');

  const remote = names.find((name) => n1.ownerOf('org_a', 'm', name) === 'n2') as string;
  await t.rejects(
    n1.send('org_a', 'm', remote, { type: 'BAD' }, {}),
    { status: 403, code: 'rejected-by-machine-authorizer' },
    'a typed error crosses as it was',
  );
  await t.rejects(
    n1.send('org_a', 'm', remote, { type: 'BUG' }, {}),
    { status: 500, code: 'internal' },
    'anything else is a 500 without its message',
  );
  t.same(errors, ['a forwarded command failed'], 'and is logged on the owner');

  // n2 leaves: n1 owns everything in its view; a request for n2's key runs on n1.
  n2.stop();
  members = ['n1'];
  const moved = await n1.read('org_a', 'm', remote, {});
  t.equal(moved.state, 'n1', 'the key moved to the remaining node');

  // Views disagree for a moment: n1 thinks n2 owns a key, n2 (answering) thinks n1 does. Nothing runs twice.
  n2.start();
  const before = ran.n2.length;
  members = ['n1', 'n2'];
  const split = names.find((name) => n1.ownerOf('org_a', 'm', name) === 'n2') as string;
  const viewOfN2 = ['n1'];
  (n2 as unknown as { options: { members: () => readonly string[] } }).options.members = () => viewOfN2;
  setTimeout(() => viewOfN2.push('n2'), 300);
  const head = await n1.send('org_a', 'm', split, { type: 'GO' }, {});
  t.equal(head.state, 'n2', 'asked again until the owner agreed');
  t.equal(ran.n2.length - before, 1, 'and run there once');

  // The owner takes a request and then leaves the cluster without answering: the request is asked
  // again of the new owner, with the same request id (which lets a real owner recognise it).
  const hung = names.find((name) => n1.ownerOf('org_a', 'm', name) === 'n2') as string;
  requestIds.length = 0;
  setTimeout(() => (members = ['n1']), 300);
  (n1 as unknown as { options: { members: () => readonly string[] } }).options.members = () => members;
  const sent = n1.send('org_a', 'm', hung, { type: 'HANG' }, {});
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  t.equal(requestIds.length, 2, 'taken by n2, then asked again of n1');
  const [first, second] = requestIds.map((entry) => entry.split(' '));
  t.equal(first?.[0], 'n2');
  t.equal(second?.[0], 'n1');
  t.equal(first?.[1], second?.[1], 'with the same request id');
  void sent;
});

t.test('a create or send through the node tells onWrite: answered, or not got to its owner; not a 4xx', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  let members = ['n1'];
  const told: Array<string | undefined> = [];
  const forwarder = await startForwarder(t, nats, 'n1', ownerSide('n1', []), () => members, undefined, {
    moveWindowMs: 300,
    onWrite: (failure) => told.push(failure),
  });
  await forwarder.send('org_a', 'm', 'i1', { type: 'GO' }, {});
  await t.rejects(forwarder.send('org_a', 'm', 'i1', { type: 'BAD' }, {}), { status: 403, code: 'rejected-by-machine-authorizer' });
  await forwarder.read('org_a', 'm', 'i1', {});
  t.same(told, [undefined], 'the send answered; the 403 and the read tell nothing');
  members = ['n1', 'gone'];
  const away = nameOwnedBy(forwarder, 'gone');
  await t.rejects(forwarder.send('org_a', 'm', away, { type: 'GO' }, {}), { status: 503, code: 'unavailable' });
  t.equal(told.length, 2);
  t.match(told[1], /keeps moving/, 'a send whose owner could not be reached tells why');
});

t.test(
  "a send to an owner no one listens for that stays in this node's view is a 503 within 2 s, not after the move window",
  { skip },
  async (t) => {
    // A member kept because another member still hears it (membership.ts): a link that fails one way.
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const members = ['n1', 'away'];
    const forwarder = await startForwarder(t, nats, 'n1', ownerSide('n1', []), () => members);
    const name = nameOwnedBy(forwarder, 'away');
    const started = Date.now();
    await t.rejects(forwarder.send('org_a', 'm', name, { type: 'GO' }, {}), {
      status: 503,
      code: 'unavailable',
      message: /node away, the owner of instance .* cannot be reached from this node now; retry/,
    });
    const tookMs = Date.now() - started;
    t.ok(tookMs >= 2_000 && tookMs < 4_000, `answered after ${tookMs} ms (the move window is 5 s)`);
  },
);

t.test(
  "a list or an index query that needs an owner no one listens for, kept in this node's view, is a 503 within 2 s",
  { skip },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const members = ['n1', 'away'];
    const asked: number[][] = [];
    const reads = {
      ...byPartition(() => members).reads,
      listPart: async (partitions: readonly number[]) => (asked.push([...partitions]), []),
      queryPart: async (partitions: readonly number[]) => (asked.push([...partitions]), []),
    };
    const forwarder = await startForwarder(t, nats, 'n1', ownerSide('n1', []), () => members, undefined, { reads });
    const asks: [string, () => Promise<unknown>][] = [
      ['a list', () => forwarder.listInstances('org_a', 'm', undefined, 10)],
      ['an index query', () => forwarder.queryIndex({ orgId: 'org_a', machine: 'm', index: 'i', descending: false, limit: 10 })],
    ];
    for (const [what, ask] of asks) {
      const started = Date.now();
      await t.rejects(
        ask(),
        {
          status: 503,
          code: 'unavailable',
          message: /^node away, which holds part of what was asked, cannot be reached from this node now; retry$/,
        },
        what,
      );
      const tookMs = Date.now() - started;
      t.ok(tookMs >= 2_000 && tookMs < 4_000, `${what} answered after ${tookMs} ms (the move window is 5 s)`);
    }
    t.ok(asked.length > 0, "n1 read its own partitions' parts meanwhile");
  },
);

t.test(
  'a history page larger than one message between nodes comes in parts; another answer too large for one is a 500 at once',
  { skip },
  async (t) => {
    const nats = await startNats(1); // (max_payload 8 MB, as cluster/README.md says to set)
    t.teardown(() => nats.stop());
    const members = ['n1', 'n2'];
    const pad = 'x'.repeat(1_000_000);
    const records = Array.from({ length: 12 }, (_, i) => ({
      seq: i + 1,
      createdAt: new Date(1_000 + i).toISOString(),
      ts: 1_000 + i,
      event: { type: 'GO', pad },
      state: 's',
    }));
    const asked: number[] = [];
    const reads = {
      ...byPartition(() => members).reads,
      history: (_o: string, _m: string, _n: string, afterSeq: number, limit: number) => (
        asked.push(afterSeq),
        records.filter((record) => record.seq > afterSeq).slice(0, limit)
      ),
    };
    const hugeState = {
      ...ownerSide('n2', []),
      read: async () => ({ ...(await ownerSide('n2', []).read('o', 'm', 'n', {})), context: { pad: 'y'.repeat(9_000_000) } }),
    };
    const errors: string[] = [];
    await startForwarder(
      t,
      nats,
      'n2',
      hugeState,
      () => members,
      (message) => errors.push(message),
      { reads },
    );
    const n1 = await startForwarder(t, nats, 'n1', ownerSide('n1', []), () => members);
    const name = nameOwnedBy(n1, 'n2');

    let started = Date.now();
    const got = await n1.listTransitions('org_a', 'm', name, 0, 101);
    t.same(
      got.map((record) => record.seq),
      records.map((record) => record.seq),
      'every record, in order',
    );
    t.equal(got[11]?.event.pad, pad, 'whole');
    t.ok(asked.length > 1, `asked ${asked.length} times, from ${asked.join(', ')}`);
    t.notOk(asked.includes(12), 'not asked again after the last part, which came whole');
    t.ok(Date.now() - started < 1_500, `in ${Date.now() - started} ms (the asker's timeout is 2 s)`);
    t.same(await n1.listTransitions('org_a', 'm', name, 10, 1), [records[10]], 'a page of one, from a cursor');
    asked.length = 0;
    t.same(
      (await n1.listTransitions('org_a', 'm', name, 9, 101)).map((record) => record.seq),
      [10, 11, 12],
      'the end of a history, from a cursor',
    );
    t.same(asked, [9], 'a part that fits in one message is asked once: its owner says it came whole');

    started = Date.now();
    await t.rejects(n1.read('org_a', 'm', name, {}), { status: 500, code: 'internal' }, 'a state too large to answer across');
    t.ok(Date.now() - started < 1_500, `answered in ${Date.now() - started} ms, not after the asker's timeout`);
    t.same(errors, [], 'nothing went unanswered');
  },
);

t.test('settleNotOwned waits for the commands under way on instances this node gave away, within its bound', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  let members = ['n1'];
  const nc = await connectTo(nats, 'n1');
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const side = ownerSide('n1', []);
  const forwarder = new Forwarder(
    nc,
    { ...side, send: async (...args) => (args[3].type === 'SLOW' && (await held), side.send(...args)) },
    { cluster: 'c', nodeId: 'n1', members: () => members, ...byPartition(() => members), timeoutMs: 2_000, onError: () => undefined },
  );
  forwarder.start();
  t.teardown(async () => {
    forwarder.stop();
    await nc.close();
  });
  const ownerWithN2 = (name: string) => ownerOf(`partition/${partitionOf('org_a', 'm', name, 16)}`, ['n1', 'n2']);
  const names = Array.from({ length: 40 }, (_, i) => `i${i}`);
  const givenAway = names.find((name) => ownerWithN2(name) === 'n2') as string;
  const kept = names.find((name) => ownerWithN2(name) === 'n1') as string;

  const slowKept = forwarder.send('org_a', 'm', kept, { type: 'SLOW' }, {});
  const slowGiven = forwarder.send('org_a', 'm', givenAway, { type: 'SLOW' }, {});
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.equal(await forwarder.settleNotOwned(50), true, 'while this node owns both, nothing is given away');
  members = ['n1', 'n2'];
  t.equal(await forwarder.settleNotOwned(50), false, 'n2 owns one now: its send is still under way after 50 ms');
  const settled = forwarder.settleNotOwned(2_000);
  release();
  t.equal(await settled, true, 'settled once it answered');
  await Promise.all([slowKept, slowGiven]);
});

t.test('a command that outlives a hand-over and finds its copy let go (404, 409) runs on the new owner', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  let members = ['n1'];
  const ran: { n1: string[]; n2: string[] } = { n1: [], n2: [] };
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const make = (id: 'n1' | 'n2', owner: OwnerSide) => startForwarder(t, nats, id, owner, () => members);
  // n1's copy loses the instance while the send waits (what a node's store does once a partition is given up)
  const side = ownerSide('n1', ran.n1);
  const n1 = await make('n1', {
    ...side,
    delete: async () => (await held, false),
    send: async (...args) => {
      await held;
      if (args[3].type === 'GONE') throw new ServiceError(404, 'not-found', `instance ${args[2]} does not exist`);
      throw new ServiceError(409, 'invalid-state', 'the instance was changed concurrently; retry');
    },
  });
  await make('n2', ownerSide('n2', ran.n2));
  const ownerWithN2 = (name: string) => ownerOf(`partition/${partitionOf('org_a', 'm', name, 16)}`, ['n1', 'n2']);
  const names = Array.from({ length: 40 }, (_, i) => `i${i}`);
  const givenAway = names.filter((name) => ownerWithN2(name) === 'n2');
  const kept = names.find((name) => ownerWithN2(name) === 'n1') as string;

  const gone = n1.send('org_a', 'm', givenAway[0] as string, { type: 'GONE' }, {});
  const movedHead = n1.send('org_a', 'm', givenAway[1] as string, { type: 'MOVED' }, {});
  const deleted = n1.delete('org_a', 'm', givenAway[2] as string);
  const stays = t.rejects(
    n1.send('org_a', 'm', kept, { type: 'GONE' }, {}),
    { status: 404, code: 'not-found' },
    'on an instance this node still owns, a 404 is the answer',
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  members = ['n1', 'n2'];
  release();
  t.equal((await gone).state, 'n2', 'a 404 on the copy let go: asked of the new owner, which answers');
  t.equal((await movedHead).state, 'n2', 'a 409 likewise');
  t.equal(await deleted, true, "a delete that found nothing on the copy let go: the new owner's answer");
  await stays;
  t.same(ran.n2, [`send ${givenAway[0]} GONE`, `send ${givenAway[1]} MOVED`], 'each ran once on the new owner');
});

t.test(
  "a 503 for a request asked again after a lost answer says it may have been applied; a first ask's 503 says retry",
  { skip },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const members = () => ['n1', 'n2'];
    let asked = 0;
    const side = ownerSide('n2', []);
    await startForwarder(
      t,
      nats,
      'n2',
      {
        ...side,
        send: async (_o, _m, _name, event) => {
          // The first copy is taken and never answered (its owner's answer lost); the copy asked again finds
          // the log unreadable as the stream elects a leader (the fence before it runs: LogInstanceStore.fence).
          if (event.type === 'LOST' && asked++ === 0) await new Promise(() => {});
          throw new ServiceError(503, 'unavailable', "the cluster's log cannot be read now (timeout); retry");
        },
      },
      members,
    );
    const n1 = await startForwarder(t, nats, 'n1', ownerSide('n1', []), members);
    const names = Array.from({ length: 40 }, (_, i) => `i${i}`);
    const remote = names.find((name) => n1.ownerOf('org_a', 'm', name) === 'n2') as string;

    await t.rejects(
      n1.send('org_a', 'm', remote, { type: 'FIRST' }, {}),
      { status: 503, code: 'unavailable', message: "the cluster's log cannot be read now (timeout); retry" },
      "a first ask's 503 stands as it was: nothing ran",
    );
    const failure = await n1.send('org_a', 'm', remote, { type: 'LOST' }, {}).then(
      () => undefined,
      (error: unknown) => error as ServiceError,
    );
    t.equal(asked, 2, 'taken, then asked again after its answer did not come');
    t.match(failure, { status: 503, code: 'unavailable' });
    t.match(
      failure?.message,
      /^the cluster's log cannot be read now \(timeout\); the request was asked again after its first answer was lost, so it may or may not have been applied: read the instance, then retry$/,
    );
  },
);

t.test('an instance the owner found missing runs again once its copy caught up has it; else the 404 stands', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const ran: string[] = [];
  const side = ownerSide('n1', ran);
  // (the owner's copy lacks instance `late` at first, as one just taken over can before it caught up)
  let caughtUp = false;
  const asked: string[] = [];
  const errors: string[] = [];
  const n1 = await startForwarder(
    t,
    nats,
    'n1',
    {
      ...side,
      send: async (orgId, machine, name, event, ...rest) => {
        if ((name === 'late' && !caughtUp) || name === 'none') throw new InstanceNotFoundError('m', name);
        if (name === 'nomachine') throw new ServiceError(404, 'not-found', 'machine m does not exist');
        return side.send(orgId, machine, name, event, ...rest);
      },
    },
    () => ['n1'],
    (message) => errors.push(message),
    {
      foundAfterCatchUp: async (_o, _m, name) => {
        asked.push(name);
        caughtUp = true;
        return name === 'late';
      },
    },
  );
  t.equal((await n1.send('org_a', 'm', 'late', { type: 'E' }, {})).state, 'n1', 'found once the copy caught up: the request ran again');
  t.same(ran, ['send late E'], 'once');
  t.match(errors, [/instance late of machine m was not in this node's copy/], 'and the node says so');
  await t.rejects(n1.send('org_a', 'm', 'none', { type: 'E' }, {}), { status: 404, code: 'not-found' }, 'an instance the log has not: 404');
  await t.rejects(
    n1.send('org_a', 'm', 'nomachine', { type: 'E' }, {}),
    { status: 404, code: 'not-found' },
    'a 404 that is not of the instance',
  );
  t.same(asked, ['late', 'none'], 'the copy is checked for 404s of the instance only');
});

t.test("a bad message on a node's subject costs one error reply, never the process; gate errors keep parameter", { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const members = ['n1', 'n2'];
  const errors: string[] = [];
  const ran: string[] = [];
  const gateCalls: string[] = [];
  const owner: OwnerSide = {
    ...ownerSide('n1', ran),
    setTargetVersion: async () => undefined,
    whileDeletingMachine: (_o, _m, work) => work(),
    gateMachine: (_o, machine) => {
      gateCalls.push(machine);
      if (machine === 'refused') throw new ServiceError(400, 'invalid-parameter', 'not this machine', 'machine');
      if (machine === 'buggy') throw new TypeError('a bug in the gate');
    },
  };
  const nc1 = await connectTo(nats, 'n1');
  const n1 = new Forwarder(nc1, owner, {
    cluster: 'c',
    nodeId: 'n1',
    members: () => members,
    ...byPartition(() => members),
    timeoutMs: 2_000,
    onError: (m) => errors.push(m),
  });
  n1.start();
  await nc1.flush();
  const nc2 = await connectTo(nats, 'n2');
  const n2 = new Forwarder(nc2, ownerSide('n2', []), {
    cluster: 'c',
    nodeId: 'n2',
    members: () => members,
    ...byPartition(() => members),
    timeoutMs: 2_000,
    onError: (m) => errors.push(m),
  });
  t.teardown(async () => {
    n1.stop();
    await nc1.close();
    await nc2.close();
  });

  // Such a rejection would end a real node (Node's default for unhandled rejections): here it is counted.
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => void process.off('unhandledRejection', onUnhandled));

  const subject = 'statehold.c.node.n1.calls';
  const ask = async (payload: string | Uint8Array) => {
    try {
      const reply = unpack((await nc2.request(subject, payload, { timeout: 1_000 })).data) as Record<string, unknown>;
      // (an error travels as its JSON text)
      return typeof reply.error === 'string' ? { ...reply, error: JSON.parse(reply.error) as unknown } : reply;
    } catch (error) {
      return { noReply: String(error) };
    }
  };
  const v = COMMAND_PROTOCOL;
  const key = { orgId: 'org_a', machine: 'm', name: 'a' };
  const bad: Array<[string, string | Uint8Array]> = [
    // what the JSON calls of the release before looked like, and other text
    ...['not json', 'null', '5', '[]', '{}', '{"op":"read","args":["org_a","m","a",{}]}'].map((text): [string, string] => [text, text]),
    ['a truncated frame', encodeCommand({ op: 'read', ...key, authContext: {} }).subarray(0, 12)],
    ['a frame of nil', pack(null)],
    ['a frame of a list', pack(['read', 'org_a', 'm', 'a'])],
    ['no version', pack({ op: 'read', ...key, authContext: {} })],
    ['another version', pack({ v: v + 1, op: 'read', ...key, authContext: {} })],
    ['no op', pack({ v, ...key })],
    ['an unknown op', pack({ v, op: 'nope', ...key })],
    ['an op from the prototype', pack({ v, op: 'toString', ...key })],
    ['create without fields', pack({ v, op: 'create' })],
    ['create without a request id', pack({ v, op: 'create', ...key, versionId: 'ver_a', context: {}, authContext: {} })],
    ['send with an event without a type', pack({ v, op: 'send', ...key, event: '{}', authContext: '{}', requestId: 'r' })],
    ['send with a list for an auth context', pack({ v, op: 'send', ...key, event: '{"type":"GO"}', authContext: '[]', requestId: 'r' })],
    [
      'send with an event as a map, not JSON text',
      pack({ v, op: 'send', ...key, event: { type: 'GO' }, authContext: '{}', requestId: 'r' }),
    ],
    ['send with an event that is not JSON', pack({ v, op: 'send', ...key, event: '{type:GO}', authContext: '{}', requestId: 'r' })],
    ['read with numbers for names', pack({ v, op: 'read', orgId: 1, machine: 2, name: 3, authContext: {} })],
    ['setStatus to another status', pack({ v, op: 'setStatus', ...key, status: 'stopped' })],
    ['history with a negative limit', pack({ v, op: 'history', ...key, afterSeq: 0, limit: -1 })],
    ['receive with half a message', pack({ v, op: 'receive', message: '{"orgId":"o"}' })],
    ['gateMachine without closed', pack({ v, op: 'gateMachine', orgId: 'o', machine: 'm' })],
    ['listPart with bad partitions', pack({ v, op: 'listPart', partitions: [-1], orgId: 'o', machine: 'm', limit: 1 })],
    ['queryPart without a query', pack({ v, op: 'queryPart', partitions: [0] })],
  ];
  for (const [label, payload] of bad) {
    t.match(await ask(payload), { v, ok: false, error: { status: 500, code: 'internal' } }, `${label}: one error reply`);
  }
  t.equal(errors.length, bad.length, 'each logged on the node it reached');
  t.ok(
    errors.every((error) => error.startsWith('a forwarded command was not one this node reads')),
    'as a command this node does not read',
  );
  t.same(ran, [], 'nothing ran');
  t.same(unhandled.map(String), [], 'no unhandled rejection');

  errors.length = 0;
  t.match(
    await ask(encodeCommand({ op: 'gateMachine', orgId: 'org_a', machine: 'buggy', closed: true })),
    { v, ok: false, error: { status: 500, code: 'internal' } },
    'a gate that fails with no ServiceError: a 500 reply',
  );
  t.same(errors, ['a forwarded command failed']);
  t.same(unhandled.map(String), [], 'still no unhandled rejection');

  // A machine's deletion asked through n2 relays n1's gate refusal whole, parameter included.
  await t.rejects(
    n2.whileDeletingMachine('org_a', 'refused', async () => 'deleted'),
    { status: 400, code: 'invalid-parameter', parameter: 'machine', message: 'not this machine' },
  );

  // The node still answers.
  const name = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].find((candidate) => n2.ownerOf('org_a', 'm', candidate) === 'n1') as string;
  t.equal((await n2.read('org_a', 'm', name, {})).state, 'n1', 'a good command after them runs as ever');
});

t.test('commands and replies are MessagePack frames of one protocol version, each checked by its op', async (t) => {
  const command = {
    op: 'send',
    orgId: 'o',
    machine: 'm',
    name: 'a',
    event: { type: 'GO' },
    authContext: { sub: 'u' },
    requestId: 'r1',
  } as const;
  t.same(decodeCommand(encodeCommand(command)), { command }, 'a command comes back as it was sent, without the version');
  t.same(
    unpack(encodeCommand(command)),
    { v: COMMAND_PROTOCOL, ...command, event: '{"type":"GO"}', authContext: '{"sub":"u"}' },
    "with its fields named, the user's values as JSON text, and the version",
  );
  // what MessagePack would not carry: an own key __proto__ (msgpackr renames it), a lone surrogate
  const odd = JSON.parse('{"type":"GO","__proto__":{"x":1},"lone":"a\\ud800b"}') as { type: string };
  const carried = decodeCommand(encodeCommand({ ...command, event: odd, authContext: odd }));
  t.equal(
    JSON.stringify(carried),
    JSON.stringify({ command: { ...command, event: odd, authContext: odd } }),
    'every JSON value comes back',
  );
  t.ok(Object.prototype.hasOwnProperty.call((carried as { command: { event: object } }).command.event, '__proto__'), 'own __proto__ kept');
  t.match(decodeCommand(pack({ ...command, v: COMMAND_PROTOCOL + 1 })), { problem: /protocol version/ });

  const state = { state: { a: 'b' }, context: { n: 1, public: { x: 1 } }, tags: ['t'], done: false, ts: 5 };
  t.same(decodeReply('send', encodeReply({ ok: true, value: state })), { ok: true, value: state });
  const oddState = { ...state, context: JSON.parse('{"__proto__":{"x":1},"lone":"a\\ud800b"}') as InstanceState['context'] };
  t.equal(
    JSON.stringify(decodeReply('send', encodeReply({ ok: true, value: oddState }))),
    JSON.stringify({ ok: true, value: oddState }),
    "an answer's context comes back whole",
  );
  t.same(decodeReply('delete', encodeReply({ ok: true, value: true })), { ok: true, value: true });
  t.same(decodeReply('setStatus', encodeReply({ ok: true, value: null })), { ok: true, value: null }, 'nothing to answer: nil');
  t.same(
    decodeReply('history', encodeReply({ ok: true, value: [], whole: true })),
    { ok: true, value: [], whole: true },
    'a whole history part',
  );
  t.same(
    decodeReply('history', pack({ v: COMMAND_PROTOCOL, ok: true, value: '[]' })),
    { ok: true, value: [] },
    'an owner of an earlier release says nothing of it: its asker asks on, as before',
  );
  t.same(decodeReply('send', encodeReply({ ok: false, moved: true })), { ok: false, moved: true });
  const error = { status: 400, code: 'invalid-parameter', message: 'no', parameter: 'event' } as const;
  t.same(decodeReply('send', encodeReply({ ok: false, error })), { ok: false, error });
  const quoting = { status: 400, code: 'machine-code-error', message: 'machine code threw: Error: act \ud800 \udc00😀' } as const;
  t.equal(
    JSON.stringify(decodeReply('send', encodeReply({ ok: false, error: quoting }))),
    JSON.stringify({ ok: false, error: quoting }),
    "an error's message comes back whole, lone surrogates and all",
  );
  t.equal(
    decodeReply('send', pack({ v: COMMAND_PROTOCOL + 1, ok: true, value: JSON.stringify(state) })),
    undefined,
    'a reply of another version is not read',
  );
  t.equal(decodeReply('send', encodeReply({ ok: true, value: true })), undefined, "a reply that is not the op's answer is not read");
  t.equal(decodeReply('send', Buffer.from('{"ok":true}')), undefined, 'nor JSON');
  t.same(
    Object.keys(stateOf({ ...state, snapshot: '{}', pendingTimers: [], indexValues: {}, seq: 3 } as InstanceState)).sort(),
    ['context', 'done', 'state', 'tags', 'ts'],
    'a state answer carries what the API shows, not the rest of the head',
  );
});
