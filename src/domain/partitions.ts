/**
 * A cluster's instances are divided into a fixed number of partitions (chosen when its log is made,
 * never changed): an instance's partition is a hash of its org, machine and name. Partitions, not
 * instances, are what nodes own (design.md §6.2): a membership change moves whole partitions, and a
 * new owner catches a partition up from the log as one unit.
 */
export const DEFAULT_PARTITIONS = 64;

/** Partition counts a log may be made with (each owned partition is one consumer on its owner). */
export const MAX_PARTITIONS = 1_024;

/** The partition of an instance: FNV-1a of `org/machine/name`, with murmur3's finalizer, mod `count`. */
export const partitionOf = (orgId: string, machine: string, name: string, count: number): number => {
  let hash = 0x811c9dc5;
  hash = fnv(hash, orgId);
  hash = fnv(Math.imul(hash ^ 0x2f, 0x01000193), machine);
  hash = fnv(Math.imul(hash ^ 0x2f, 0x01000193), name);
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return (hash >>> 0) % count;
};

const fnv = (seed: number, text: string): number => {
  let hash = seed;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash;
};
