/**
 * What a cluster node's instance store remembers of the TX log beside its copy's heads, since this
 * process started (log-instance-store.ts): each a bounded memory, the entry written longest ago
 * forgotten first.
 * - `latest`: the log position of the latest entry applied here, by instance, for the instances written
 *   last: an owner's head held in memory that is older is stale (the others are looked up in the copy).
 * - `headless`: the log position of instances that have entries but no head in this copy (deleted; or
 *   written only by entries that need a head, such as a fence of a create retried before the instance
 *   existed); heads hold their own (`logSeq`). Once one is forgotten, `headlessForgotten` says so.
 * - `uncounted`: stream sequences of entries applied here that did not count (an append asks within
 *   seconds of its entry: see LogInstanceStore.countsHere).
 * - `fenced`: requests taken over by a fence, and the node that fenced them (a fence matters only while
 *   the request it fences may still be under way elsewhere: seconds).
 * - `rebuilt`: instances rebuilt from the log (copy-mending.ts), and the log's last entry
 *   they were rebuilt to, until an entry past it is applied: a head held in memory past it is the entry
 *   the log never committed.
 */
export class LogPositions {
  private readonly latest = new Map<string, number>();
  private readonly headless = new Map<string, number>();
  private readonly uncounted = new Map<number, true>();
  private readonly fenced = new Map<string, string>();
  private readonly rebuilt = new Map<string, number>();
  /** Whether a headless instance's position was forgotten (the log must then be asked: LogInstanceStore.counts). */
  headlessForgotten = false;

  latestOf(key: string): number | undefined {
    return this.latest.get(key);
  }

  /** Keeps an instance's latest log position, unless a later one is kept already. */
  noteLatest(key: string, seq: number): void {
    if (this.rebuilt.size > 0 && (this.rebuilt.get(key) ?? seq) < seq) this.rebuilt.delete(key);
    if ((this.latest.get(key) ?? -1) >= seq) return;
    remember(this.latest, key, seq, LATEST_KEPT);
  }

  headlessAt(key: string): number | undefined {
    return this.headless.get(key);
  }

  noteHeadless(key: string, seq: number): void {
    if (remember(this.headless, key, seq, HEADLESS_KEPT)) this.headlessForgotten = true;
  }

  /** The instance has a head in the copy again: its position is the head's. */
  headed(key: string): void {
    this.headless.delete(key);
  }

  /** The instance left this copy (its partition given up). */
  forget(key: string): void {
    this.latest.delete(key);
    this.headless.delete(key);
    this.rebuilt.delete(key);
  }

  noteRebuilt(key: string, last: number): void {
    remember(this.rebuilt, key, last, REBUILT_KEPT);
  }

  rebuiltTo(key: string): number | undefined {
    return this.rebuilt.get(key);
  }

  noteUncounted(seq: number): void {
    remember(this.uncounted, seq, true, UNCOUNTED_KEPT);
  }

  isUncounted(seq: number): boolean {
    return this.uncounted.has(seq);
  }

  noteFence(requestId: string, by: string): void {
    remember(this.fenced, requestId, by, FENCES_KEPT);
  }

  /** The node that fenced a request lately, if one did. */
  fencedBy(requestId: string): string | undefined {
    return this.fenced.get(requestId);
  }

  get anyFenced(): boolean {
    return this.fenced.size > 0;
  }
}

/** Sets `key` as the newest entry of `memory`; past `kept` entries forgets the oldest, and says so (true). */
const remember = <K, V>(memory: Map<K, V>, key: K, value: V, kept: number): boolean => {
  memory.delete(key);
  memory.set(key, value);
  if (memory.size <= kept) return false;
  memory.delete(memory.keys().next().value as K);
  return true;
};

/** Instances whose latest log position is kept in memory (isCurrent looks the others up in the copy). */
const LATEST_KEPT = 100_000;

/** Entries that did not count remembered. */
const UNCOUNTED_KEPT = 10_000;

/** Rebuilt instances remembered (a rebuild is rare: a replica that diverged). */
const REBUILT_KEPT = 10_000;

/** Fenced requests remembered. */
const FENCES_KEPT = 10_000;

/** Positions of instances without a head kept in memory (past it, the log is asked). */
const HEADLESS_KEPT = 100_000;
