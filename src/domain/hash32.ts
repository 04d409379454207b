/** 32-bit string hashing for placement (partitions, rendezvous weights): fast, stable across processes, not cryptographic. */

/** FNV-1a over a string's UTF-16 code units, from `seed` (0x811c9dc5 to start). */
export const fnv1a = (seed: number, text: string): number => {
  let hash = seed;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash;
};

/** FNV-1a's offset basis: the seed of a first part. */
export const FNV_OFFSET = 0x811c9dc5;

/** Folds a separator into a hash between two parts, so ("ab", "c") and ("a", "bc") differ. */
export const fnvSeparate = (hash: number, separator: number): number => Math.imul(hash ^ separator, 0x01000193);

/** murmur3's finalizer: spreads every input bit over the output, as an unsigned 32-bit number. */
export const fmix32 = (input: number): number => {
  let hash = input;
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
};
