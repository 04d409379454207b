import type { InstanceHead, TransitionRecord } from '../instance-store.js';

/** One instance's heads and records that are durable in the write-ahead log but not yet in LMDB. */
interface Unapplied {
  head: InstanceHead;
  /** Oldest first, all newer than what LMDB holds for the instance. */
  records: TransitionRecord[];
}

const SEPARATOR = '\u0000';
export const instanceKey = (orgId: string, machine: string, name: string): string => orgId + SEPARATOR + machine + SEPARATOR + name;

/**
 * Commits acknowledged from the write-ahead log whose LMDB writes have not landed yet (usually for
 * a fraction of a millisecond): reads add them to what LMDB holds, so an acknowledged write is
 * visible at once. Only head-and-history commits take that path (lmdb-instance-store.ts), so heads
 * and histories are all there is to add (a head's pending timers and index values come with it).
 */
export class UnappliedCommits {
  private readonly byKey = new Map<string, Unapplied>();

  get size(): number {
    return this.byKey.size;
  }

  add(key: string, head: InstanceHead, records: TransitionRecord[]): void {
    const entry = this.byKey.get(key);
    if (entry) {
      entry.head = head;
      entry.records.push(...records);
    } else {
      this.byKey.set(key, { head, records: [...records] });
    }
  }

  /** LMDB now holds the instance up to `seq`: keep only what is newer. */
  landed(key: string, seq: number): void {
    const entry = this.byKey.get(key);
    if (!entry) return;
    if (entry.head.seq <= seq) {
      this.byKey.delete(key);
      return;
    }
    entry.records = entry.records.filter((record) => record.seq > seq);
  }

  forget(key: string): void {
    this.byKey.delete(key);
  }

  head(key: string): InstanceHead | undefined {
    return this.byKey.get(key)?.head;
  }

  /** Records of the instance after `afterSeq`, oldest first. */
  recordsAfter(key: string, afterSeq: number, limit: number): TransitionRecord[] {
    const entry = this.byKey.get(key);
    if (!entry || limit <= 0) return [];
    const out: TransitionRecord[] = [];
    for (const record of entry.records) {
      if (record.seq <= afterSeq) continue;
      out.push(record);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Every instance's head, in no order. */
  *heads(): Iterable<InstanceHead> {
    for (const { head } of this.byKey.values()) yield head;
  }

  /** Heads of one machine's instances, in no order. */
  headsOf(orgId: string, machine: string): InstanceHead[] {
    const out: InstanceHead[] = [];
    for (const { head } of this.byKey.values()) if (head.orgId === orgId && head.machine === machine) out.push(head);
    return out;
  }
}
