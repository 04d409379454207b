import { fmix32, fnv1a, FNV_OFFSET, fnvSeparate } from './hash32.js';

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
  let hash = fnv1a(FNV_OFFSET, orgId);
  hash = fnv1a(fnvSeparate(hash, 0x2f), machine);
  hash = fnv1a(fnvSeparate(hash, 0x2f), name);
  return fmix32(hash) % count;
};
