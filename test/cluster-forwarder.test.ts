import t from 'tap';
import { partitionOf } from '../src/domain/partitions.js';
import { Forwarder, type OwnerSide } from '../src/cluster/forwarder.js';
import { ownerOf } from '../src/cluster/rendezvous.js';
import { ServiceError } from '../src/domain/errors.js';
import type { InstanceHead } from '../src/store/instance-store.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

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

/** An owner side that records what ran on it and answers a head naming itself. */
const requestIds: string[] = [];
const ownerSide = (id: string, ran: string[]): OwnerSide => {
  const head = (name: string) => ({ name, versionId: id }) as unknown as InstanceHead;
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

t.test("each request runs once, on its owner; errors keep their status and code; a departed owner's keys move", { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  let members = ['n1', 'n2'];
  const ran: { n1: string[]; n2: string[] } = { n1: [], n2: [] };
  const errors: string[] = [];
  const make = async (id: 'n1' | 'n2') => {
    const nc = await connectTo(nats, id);
    const forwarder = new Forwarder(nc, ownerSide(id, ran[id]), {
      cluster: 'c',
      nodeId: id,
      members: () => members,
      ...byPartition(() => members),
      timeoutMs: 2_000,
      onError: (m) => errors.push(m),
    });
    forwarder.start();
    await nc.flush();
    t.teardown(async () => {
      forwarder.stop();
      await nc.close();
    });
    return forwarder;
  };
  const n1 = await make('n1');
  const n2 = await make('n2');
  const names = Array.from({ length: 40 }, (_, i) => `i${i}`);
  for (const name of names) {
    const head = await n1.send('org_a', 'm', name, { type: 'GO' }, {});
    t.equal(head.versionId, ownerOf(`partition/${partitionOf('org_a', 'm', name, 16)}`, members), `${name} ran on its owner`);
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
  t.same(errors, ['a forwarded call failed'], 'and is logged on the owner');

  // n2 leaves: n1 owns everything in its view; a request for n2's key runs on n1.
  n2.stop();
  members = ['n1'];
  const moved = await n1.read('org_a', 'm', remote, {});
  t.equal(moved.versionId, 'n1', 'the key moved to the remaining node');

  // Views disagree for a moment: n1 thinks n2 owns a key, n2 (answering) thinks n1 does. Nothing runs twice.
  n2.start();
  const before = ran.n2.length;
  members = ['n1', 'n2'];
  const split = names.find((name) => n1.ownerOf('org_a', 'm', name) === 'n2') as string;
  const viewOfN2 = ['n1'];
  (n2 as unknown as { options: { members: () => readonly string[] } }).options.members = () => viewOfN2;
  setTimeout(() => viewOfN2.push('n2'), 300);
  const head = await n1.send('org_a', 'm', split, { type: 'GO' }, {});
  t.equal(head.versionId, 'n2', 'asked again until the owner agreed');
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
  const ask = async (payload: string) => {
    try {
      return (await nc2.request(subject, payload, { timeout: 1_000 })).json<{ ok: boolean; error?: { status: number; code: string } }>();
    } catch (error) {
      return { noReply: String(error) };
    }
  };
  const bad = [
    'not json',
    'null',
    '5',
    '[]',
    '{}',
    '{"op":"create"}',
    '{"op":"create","args":[null]}',
    '{"op":"receive","args":[{"orgId":"o"}]}',
    '{"op":"read","args":[]}',
    '{"op":"read","args":[1,2,3]}',
    '{"op":"nope","args":["a","b","c"]}',
    '{"op":"gateMachine","args":["o"]}',
  ];
  for (const payload of bad) {
    t.match(await ask(payload), { ok: false, error: { status: 500, code: 'internal' } }, `${payload}: one error reply`);
  }
  t.equal(errors.length, bad.length, 'each logged on the node it reached');
  t.same(ran, [], 'nothing ran');
  t.same(unhandled.map(String), [], 'no unhandled rejection');

  errors.length = 0;
  t.match(
    await ask(JSON.stringify({ op: 'gateMachine', args: ['org_a', 'buggy', true] })),
    { ok: false, error: { status: 500, code: 'internal' } },
    'a gate that fails with no ServiceError: a 500 reply',
  );
  t.same(errors, ['a forwarded call failed']);
  t.same(unhandled.map(String), [], 'still no unhandled rejection');

  // A machine's deletion asked through n2 relays n1's gate refusal whole, parameter included.
  await t.rejects(
    n2.whileDeletingMachine('org_a', 'refused', async () => 'deleted'),
    { status: 400, code: 'invalid-parameter', parameter: 'machine', message: 'not this machine' },
  );

  // The node still answers.
  const name = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].find((candidate) => n2.ownerOf('org_a', 'm', candidate) === 'n1') as string;
  t.equal((await n2.read('org_a', 'm', name, {})).versionId, 'n1', 'a good call after them runs as ever');
});
