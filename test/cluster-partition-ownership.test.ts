import t from 'tap';
import type { MemberState } from '../src/cluster/membership.js';
import { PartitionOwnership } from '../src/cluster/partition-ownership.js';

/** Partition ownership over a membership view: one owner each, warm joins and leaves, standbys. */

const COUNT = 64;

const view = (current: string[], draining: string[] = [], self: MemberState = 'ready', joining: string[] = []) => ({
  current: () => current,
  draining: () => draining,
  joining: () => joining,
  self,
});

const ownershipOf = (self: string, members: ReturnType<typeof view>, standbys = 0) =>
  new PartitionOwnership({ self, count: COUNT, standbys, view: members });

t.test('each partition has one owner, every node agrees, and the shares are near even', async (t) => {
  const members = ['n1', 'n2', 'n3'];
  const nodes = members.map((id) => ownershipOf(id, view(members)));
  const owned = nodes.map((node) => node.owned());
  t.equal(
    owned.reduce((sum, set) => sum + set.size, 0),
    COUNT,
    'every partition owned once',
  );
  for (let partition = 0; partition < COUNT; partition++) {
    const owners = nodes.map((node) => node.ownerOf(partition));
    t.ok(
      owners.every((owner) => owner === owners[0]),
      `partition ${partition}: every node names the same owner`,
    );
  }
  for (const set of owned) t.ok(set.size > COUNT / 6, `a share of ${set.size} of ${COUNT}`);
  t.ok(nodes[0]?.ownsAll([...(owned[0] ?? [])]), 'ownsAll of its own');
  t.notOk(nodes[0]?.ownsAll([...(owned[1] ?? [])]), 'not of another node');
});

t.test('a joining node holds what it is to own before it owns anything; the others keep theirs until it is ready', async (t) => {
  const before = ['n1', 'n2', 'n3'];
  const joining = ownershipOf('n4', view(before, [], 'joining'));
  t.equal(joining.owned().size, 0, 'owns nothing yet');
  const afterJoin = ownershipOf('n4', view([...before, 'n4']));
  t.same(
    [...joining.held()].sort((a, b) => a - b),
    [...afterJoin.owned()].sort((a, b) => a - b),
    'holds exactly what it will own',
  );
  const n1Before = ownershipOf('n1', view(before)).owned();
  const n1After = ownershipOf('n1', view([...before, 'n4'])).owned();
  t.ok(
    [...n1After].every((partition) => n1Before.has(partition)),
    'a join moves partitions only to the newcomer',
  );
});

t.test('nodes that join together each hold only their share of what they will own', async (t) => {
  const all = ['n1', 'n2', 'n3'];
  const nodes = all.map((id) => ownershipOf(id, view([], [], 'joining', all)));
  t.equal(
    nodes.reduce((sum, node) => sum + node.held().size, 0),
    COUNT,
    'each partition held by one of them',
  );
  const first = nodes[0]?.held() ?? new Set<number>();
  t.same(
    [...first].sort((a, b) => a - b),
    [...ownershipOf('n1', view(all)).owned()].sort((a, b) => a - b),
    'n1 holds what it will own once all three are ready',
  );
  // The first one ready owns every partition until the others are: it holds them all then.
  t.equal(ownershipOf('n1', view(['n1'], [], 'ready', ['n2', 'n3'])).held().size, COUNT, 'alone ready, it holds all it owns');
});

t.test('a draining node keeps its share; the others hold and report warm what they are to take', async (t) => {
  const members = ['n1', 'n2', 'n3'];
  const n1 = ownershipOf('n1', view(members, ['n3']));
  const n3Share = ownershipOf('n3', view(members, [], 'ready')).owned();
  const taking = [...n3Share].filter((partition) => n1.ownerOf(partition, ['n1', 'n2']) === 'n1');
  t.ok(taking.length > 0, `n1 takes ${taking.length} of n3's partitions`);
  for (const partition of taking) t.ok(n1.held().has(partition), `n1 holds ${partition} before n3 leaves`);
  t.ok(
    [...n3Share].every((partition) => n1.ownerOf(partition) === 'n3'),
    'n3 owns its share while it drains',
  );
  t.same(n1.warmFor(new Set()), [], 'not warm before the partitions are caught up');
  t.same(n1.warmFor(new Set(taking)), ['n3'], 'warm once they are');
  const drainingSelf = ownershipOf('n3', view(members, ['n3'], 'draining'));
  t.same([...drainingSelf.held()].sort(), [...n3Share].sort(), 'the draining node holds only what it owns now');
});

t.test('with a standby, each partition is held by two nodes and owned by one', async (t) => {
  const members = ['n1', 'n2', 'n3'];
  const nodes = members.map((id) => ownershipOf(id, view(members), 1));
  for (let partition = 0; partition < COUNT; partition++) {
    const holders = nodes.filter((node) => node.held().has(partition)).length;
    t.equal(holders, 2, `partition ${partition} held by 2`);
  }
  t.equal(
    nodes.reduce((sum, node) => sum + node.owned().size, 0),
    COUNT,
    'owned once',
  );
  // The standby of a partition is its owner once the owner is gone.
  const survivors = ['n1', 'n2'];
  for (let partition = 0; partition < COUNT; partition++) {
    if (nodes[2]?.ownerOf(partition) !== 'n3') continue;
    const next = nodes[0]?.ownerOf(partition, survivors) as string;
    t.ok(nodes[members.indexOf(next)]?.held().has(partition), `partition ${partition}: its next owner ${next} holds it already`);
  }
});
