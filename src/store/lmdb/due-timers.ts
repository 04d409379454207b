import type { Database, RootDatabase } from 'lmdb';
import type { DueTimer, InstanceHead } from '../instance-store.js';
import { instanceKey } from './unapplied-commits.js';

/** [dueAt, orgId, machine, name, timerId] */
type TimerKey = [number, string, string, string, string];

const AFTER_ALL = '\uffff';

const keysOf = (head: InstanceHead | undefined): TimerKey[] =>
  head ? head.pendingTimers.map((timer): TimerKey => [timer.dueAt, head.orgId, head.machine, head.name, timer.id]) : [];

const sameKey = (a: TimerKey, b: TimerKey): boolean => a[0] === b[0] && a[4] === b[4];

/**
 * Heads acknowledged but not yet in LMDB (the write-ahead log's `unapplied`): the timers they list
 * are the instances' own, and LMDB's entries for those instances are older.
 */
export interface NewerHeads {
  readonly size: number;
  head(key: string): InstanceHead | undefined;
  heads(): Iterable<InstanceHead>;
}

/**
 * The due-time index of the LMDB instance store:
 *   timers [dueAt, orgId, machine, name, timerId] -> true   (one entry per pending timer of a head)
 *
 * `replace` queues its writes in whatever write the caller is inside (the block of a commit, a batch
 * of the write-ahead log landing, its replay at start, a deletion): entries change with their head.
 * Reads take the heads not yet in LMDB into account, so the scheduler sees a timer as soon as its
 * commit is acknowledged, and not a timer such a commit dropped.
 */
export class DueTimers {
  private readonly db: Database<true, TimerKey>;

  constructor(root: RootDatabase) {
    this.db = root.openDB({ name: 'timers', encoding: 'msgpack' });
  }

  /** Takes the instance's entries from those of `previous` (none for a create) to those of `next` (none for a deletion). */
  replace(previous: InstanceHead | undefined, next: InstanceHead | undefined): void {
    const old = keysOf(previous);
    const now = keysOf(next);
    for (const key of old) if (!now.some((kept) => sameKey(kept, key))) void this.db.remove(key);
    for (const key of now) if (!old.some((had) => sameKey(had, key))) void this.db.put(key, true);
  }

  /** How many pending timers LMDB holds (not counting commits not yet applied from the write-ahead log). */
  count(): number {
    return this.db.getCount();
  }

  /** Up to `limit` pending timers due by `uptoMs`, earliest first. */
  due(uptoMs: number, limit: number, newer: NewerHeads): DueTimer[] {
    const out: DueTimer[] = [];
    for (const [dueAt, orgId, machine, name, timerId] of this.db.getKeys({ start: [0], end: [uptoMs, AFTER_ALL] })) {
      if (newer.size > 0 && newer.head(instanceKey(orgId, machine, name))) continue;
      out.push({ dueAt, orgId, machine, name, timerId });
      if (out.length >= limit) break;
    }
    if (newer.size === 0) return out;
    for (const head of newer.heads()) {
      for (const timer of head.pendingTimers) {
        if (timer.dueAt <= uptoMs)
          out.push({ dueAt: timer.dueAt, orgId: head.orgId, machine: head.machine, name: head.name, timerId: timer.id });
      }
    }
    out.sort((a, b) => a.dueAt - b.dueAt);
    return out.length > limit ? out.slice(0, limit) : out;
  }

  /** The earliest due time of any pending timer. */
  first(newer: NewerHeads): number | undefined {
    let earliest: number | undefined;
    for (const key of this.db.getKeys({})) {
      if (newer.size > 0 && newer.head(instanceKey(key[1], key[2], key[3]))) continue;
      earliest = key[0];
      break;
    }
    if (newer.size === 0) return earliest;
    for (const head of newer.heads()) {
      for (const timer of head.pendingTimers) if (earliest === undefined || timer.dueAt < earliest) earliest = timer.dueAt;
    }
    return earliest;
  }

  /** Removes entries no head lists (queued in the caller's write). */
  remove(entries: DueTimer[]): void {
    for (const e of entries) void this.db.remove([e.dueAt, e.orgId, e.machine, e.name, e.timerId]);
  }
}
