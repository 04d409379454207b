import { fmix32, fnv1a, FNV_OFFSET, fnvSeparate } from '../domain/hash32.js';

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
const weightOf = (member: string, key: string): number => fmix32(fnv1a(fnvSeparate(fnv1a(FNV_OFFSET, member), 0x1f), key));

/** The `count` members with the highest weights for a key, best first: its owner, then its standbys. */
export const rankedOf = (key: string, members: readonly string[], count: number): string[] =>
  members
    .map((member) => ({ member, weight: weightOf(member, key) }))
    .sort((a, b) => b.weight - a.weight || (a.member < b.member ? -1 : a.member > b.member ? 1 : 0))
    .slice(0, count)
    .map((ranked) => ranked.member);
