import t from 'tap';
import { ownerOf } from '../src/cluster/rendezvous.js';

const keys = Array.from({ length: 30_000 }, (_, i) => `org_a/machine/instance-${i}`);
const owners = (members: string[]) => new Map(keys.map((key) => [key, ownerOf(key, members)]));

t.test('keys spread evenly, and every node computes the same owner', async (t) => {
  const members = ['node-a', 'node-b', 'node-c'];
  const counts = new Map<string, number>();
  for (const owner of owners(members).values()) counts.set(owner as string, (counts.get(owner as string) ?? 0) + 1);
  for (const member of members) {
    const share = (counts.get(member) ?? 0) / keys.length;
    t.ok(share > 0.3 && share < 0.37, `${member} owns ${(share * 100).toFixed(1)} %`);
  }
  t.equal(ownerOf('k', ['node-c', 'node-a', 'node-b']), ownerOf('k', members), 'the order of the member list does not matter');
  t.equal(ownerOf('k', []), undefined);
});

t.test('a member leaving moves only its keys; one joining takes about a quarter, from everyone', async (t) => {
  const before = owners(['node-a', 'node-b', 'node-c']);
  const afterLeave = owners(['node-a', 'node-c']);
  let moved = 0;
  for (const [key, owner] of before) {
    if (owner === 'node-b') continue;
    if (afterLeave.get(key) !== owner) moved++;
  }
  t.equal(moved, 0, 'no key of a remaining member moved');
  const afterJoin = owners(['node-a', 'node-b', 'node-c', 'node-d']);
  let taken = 0;
  let elsewhere = 0;
  for (const [key, owner] of before) {
    const now = afterJoin.get(key);
    if (now === owner) continue;
    if (now === 'node-d') taken++;
    else elsewhere++;
  }
  t.equal(elsewhere, 0, 'a key only ever moves to the newcomer');
  const share = taken / keys.length;
  t.ok(share > 0.22 && share < 0.28, `the newcomer took ${(share * 100).toFixed(1)} %`);
});
