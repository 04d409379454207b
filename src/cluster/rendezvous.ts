/**
 * Rendezvous (highest random weight) hashing: the owner of a key is the member whose hash with the
 * key is highest. When a member leaves, only the keys it owned move (each to its own next best);
 * when one joins, it takes about 1/N of the keys, from every other member. No ring to keep.
 */
export const ownerOf = (key: string, members: readonly string[]): string | undefined => {
  let best: string | undefined;
  let bestWeight = -1;
  for (const member of members) {
    const weight = weightOf(member, key);
    // (ties, astronomically rare, go to the smaller id, so every node agrees)
    if (weight > bestWeight || (weight === bestWeight && best !== undefined && member < best)) {
      best = member;
      bestWeight = weight;
    }
  }
  return best;
};

/** A 32-bit weight of (member, key): FNV-1a over both, then murmur3's finalizer to spread the bits. */
const weightOf = (member: string, key: string): number => {
  let hash = 0x811c9dc5;
  hash = fnv(hash, member);
  hash = Math.imul(hash ^ 0x1f, 0x01000193);
  hash = fnv(hash, key);
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
};

const fnv = (seed: number, text: string): number => {
  let hash = seed;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash;
};

/** The `count` members with the highest weights for a key, best first: its owner, then its standbys. */
export const rankedOf = (key: string, members: readonly string[], count: number): string[] =>
  members
    .map((member) => ({ member, weight: weightOf(member, key) }))
    .sort((a, b) => b.weight - a.weight || (a.member < b.member ? -1 : a.member > b.member ? 1 : 0))
    .slice(0, count)
    .map((ranked) => ranked.member);
