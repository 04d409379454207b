/**
 * The entries a partition's follower could not apply, by instance. A follower hands entries on without
 * waiting (entries of different instances apply side by side; one instance's one after another), so
 * when one fails, later entries of the same instance are already queued behind it. Applied, they would
 * move the instance's position past the failed one, which the follower then delivers again and the
 * copy passes by as held: its record lost for good (a partition probe: acknowledged events missing from
 * every history, where an entry's read from the log's leader failed as JetStream elected a leader). So
 * they fail too, until the follower, restarted from the earliest failure, delivers it again.
 */
export class FailedApplies<Copy> {
  private readonly failed = new Map<string, { seq: number; copy: Copy | undefined }>();

  /**
   * Whether the entry at `seq` of instance `key`, received by `copy`, must wait for an earlier entry of
   * the instance that failed (a failure noted by another copy of the partition, one given up since, is forgotten).
   */
  waitsFor(key: string, seq: number, copy: Copy | undefined): number | undefined {
    const failure = this.failed.get(key);
    if (failure === undefined) return undefined;
    if (failure.copy === copy && seq > failure.seq) return failure.seq;
    this.failed.delete(key);
    return undefined;
  }

  /** The entry at `seq` of instance `key` is passed by, held already (mended past it meanwhile): a failure there or after is over. */
  passed(key: string, seq: number): void {
    const failure = this.failed.get(key);
    if (failure !== undefined && seq <= failure.seq) this.failed.delete(key);
  }

  /** The entry at `seq` of instance `key` could not be applied. */
  note(key: string, seq: number, copy: Copy | undefined): void {
    const failure = this.failed.get(key);
    if (failure === undefined || failure.copy !== copy || seq < failure.seq) this.failed.set(key, { seq, copy });
  }
}
