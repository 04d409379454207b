/**
 * The entries a partition's follower could not apply, by instance. A follower hands entries on without
 * waiting (entries of different instances apply side by side; one instance's one after another), so
 * when one fails, later entries of the same instance are already queued behind it. Applied, they would
 * move the instance's position past the failed one, which the follower then delivers again and the
 * copy passes by as held: its record lost for good (a partition probe: acknowledged events missing from
 * every history, where an entry's read from the log's leader failed as JetStream elected a leader). So
 * they fail too, until the follower, restarted from the earliest failure, delivers it again.
 *
 * A failure is over when an entry at or before it comes again, by its sequence or by the position it
 * names (a replica that diverged numbers entries otherwise than the leader, whose reads a follower may
 * go on with), when mending replaced the instance, and at the latest after WAIT_MS: held longer, an
 * instance whose failed entry never comes again in the same numbering would wait for good (a probe:
 * instances refused to the end of a run), and the loss it guards against needs a later entry applied
 * before a failed one that is delivered again within that time.
 */
const WAIT_MS = 10_000;

interface Failure<Copy> {
  seq: number;
  /** The position the failed entry names. */
  after: number | undefined;
  copy: Copy | undefined;
  at: number;
}

export class FailedApplies<Copy> {
  private readonly failed = new Map<string, Failure<Copy>>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Whether the entry at `seq` of instance `key` (naming position `after`), received by `copy`, must
   * wait for an earlier entry of the instance that failed: that entry's sequence, or undefined.
   */
  waitsFor(key: string, seq: number, after: number | undefined, copy: Copy | undefined): number | undefined {
    const failure = this.failed.get(key);
    if (failure === undefined) return undefined;
    const earlier = after !== undefined && failure.after !== undefined && after <= failure.after;
    if (failure.copy === copy && seq > failure.seq && !earlier && this.now() - failure.at < WAIT_MS) return failure.seq;
    this.failed.delete(key);
    return undefined;
  }

  /** The entry at `seq` of instance `key` is passed by, held already (mended past it meanwhile): a failure there or after is over. */
  passed(key: string, seq: number): void {
    const failure = this.failed.get(key);
    if (failure !== undefined && seq <= failure.seq) this.failed.delete(key);
  }

  /** The instance was replaced from the log's leader: whatever failed of it is in the copy now. */
  over(key: string): void {
    this.failed.delete(key);
  }

  /** The entry at `seq` of instance `key`, naming position `after`, could not be applied. */
  note(key: string, seq: number, after: number | undefined, copy: Copy | undefined): void {
    const failure = this.failed.get(key);
    if (failure === undefined || failure.copy !== copy || seq < failure.seq) this.failed.set(key, { seq, after, copy, at: this.now() });
  }
}
