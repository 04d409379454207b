import type { JetStreamClient } from '@nats-io/jetstream';
import { type FollowedMessage, StreamFollower } from './stream-follower.js';
import { ServiceError } from '../../domain/errors.js';

interface PartitionCopyOptions {
  partition: number;
  js: JetStreamClient;
  stream: string;
  /** The partition's subjects (`…tx.<p>.>`). */
  filter: string;
  /** The first stream sequence not applied here for this partition (1: follow from the start). */
  from: number;
  /** The partition's last entry's stream sequence in the log now. */
  lastSeq: () => Promise<number>;
  /** Applies one entry; entries of different instances may be applied side by side. */
  apply: (message: FollowedMessage) => Promise<void>;
  onError: (message: string, error: unknown) => void;
}

/**
 * A request waited for a partition this node then gave up (a change of members), whatever its catch-up
 * was doing then (a question to the log that timed out, say): a 503 that says the request may or may not
 * have been applied, not a 500. The owner's `prepare` makes it "moved" for a request's first copy, which
 * ran nowhere; a copy asked again after a lost answer keeps the 503 (the new owner could run it twice).
 */
export class PartitionGivenUpError extends ServiceError {
  constructor(readonly partition: number) {
    super(
      503,
      'unavailable',
      `partition ${partition} moved to another node while this request waited for it; it may or may not have been applied: read the instance, then retry`,
    );
  }
}

/**
 * One partition this node owns: its follower (an ordered consumer filtered to the partition's
 * subjects) and its watermark, the stream sequence up to which every entry of the partition is
 * applied to this node's copy. A partition is ready once the watermark reached the partition's last
 * entry as the log had it when the node took it: until then its owner answers nothing of it.
 */
export class PartitionCopy {
  readonly partition: number;
  /** Whether the follower started at the stream's start, so an instance it has no position of has no entry before. */
  readonly followedFromStart: boolean;
  /** The next stream sequence the follower asks for: every one of the partition before it was received. */
  private received: number;
  /** Received entries whose apply has not finished yet (applies of different instances overlap). */
  private readonly pending = new Map<number, Promise<void>>();
  private waiters: Array<{ seq: number; resolve: () => void }> = [];
  private readonly follower: StreamFollower;
  private readonly readiness: Promise<void>;
  private isReady = false;
  private stopped = false;
  /** The earliest entry whose apply failed and that is not applied yet (see behindTo). */
  private failedAt: number | undefined;
  /** The partition's last entry when the catch-up began, once the log said it (for progress lines). */
  private catchUpTo: number | undefined;

  constructor(private readonly options: PartitionCopyOptions) {
    this.partition = options.partition;
    this.received = Math.max(1, options.from);
    this.followedFromStart = this.received <= 1;
    this.follower = new StreamFollower({
      js: options.js,
      stream: options.stream,
      filter: options.filter,
      lastSeq: options.lastSeq,
      next: () => this.received,
      // Not awaited: entries of different instances apply side by side (their commits then share an
      // LMDB sync); one instance's apply one after another (the store's applyLocally).
      handle: async (message) => {
        if (this.stopped) return;
        const seq = message.seq;
        this.received = seq + 1;
        const applied = options
          .apply(message)
          .catch((error: unknown) => {
            // Not passed by: the watermark stays before it, and the follower delivers it again (with what
            // came after it, applied again harmlessly) after a pause.
            options.onError(`could not apply TX log entry ${seq} to the local store; following again from it`, error);
            this.received = Math.min(this.received, seq);
            this.failedAt = Math.min(this.failedAt ?? seq, seq);
            this.follower.restart();
          })
          .finally(() => {
            this.pending.delete(seq);
            this.moved();
          });
        this.pending.set(seq, applied);
        // Bounded: past MAX_PENDING applies in flight, the follower waits for one to finish.
        if (this.pending.size >= MAX_PENDING) await Promise.race(this.pending.values());
      },
      onError: options.onError,
    });
    this.readiness = this.catchUp();
    this.readiness.catch(() => undefined);
  }

  /** The watermark: every entry of the partition up to this stream sequence is applied here. */
  get appliedSeq(): number {
    let lowest = this.received;
    for (const seq of this.pending.keys()) if (seq < lowest) lowest = seq;
    return lowest - 1;
  }

  get ready(): boolean {
    return this.isReady;
  }

  /**
   * The stream sequence the copy must apply before it answers for the partition as a whole (a list, an
   * index query), when an entry failed to apply and is not applied yet: the entries after it wait
   * (failed-applies.ts), so the copy is behind the log by an unknown span. Undefined when it is not.
   */
  get behindTo(): number | undefined {
    if (this.failedAt !== undefined && this.appliedSeq >= this.failedAt) this.failedAt = undefined;
    return this.failedAt;
  }

  /**
   * How far the catch-up is, in stream sequences (other partitions' entries lie between this one's, so
   * this measures the span of the log, not a count of entries): `to` unknown until the log answered.
   */
  catchUpSpan(): { from: number; applied: number; to: number | undefined } {
    return { from: this.options.from - 1, applied: this.appliedSeq, to: this.catchUpTo };
  }

  /** Resolves once ready; rejects only when stopped first. */
  whenReady(): Promise<void> {
    return this.readiness;
  }

  /** Resolves once the watermark reaches `seq` (or after `ms`). */
  async appliedTo(seq: number, ms: number): Promise<void> {
    if (this.appliedSeq >= seq) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.waiters.push({ seq, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  /**
   * Resolves once the watermark reaches `seq`, an entry this node just appended (or after `ms`). When the
   * consumer has not brought it within READ_SOON_MS (it normally takes milliseconds), the follower reads
   * it from the stream, and again each READ_SOON_MS while it is still missing.
   */
  async ownEntryApplied(seq: number, ms: number): Promise<void> {
    if (this.appliedSeq >= seq) return;
    const hurry = setInterval(() => this.follower.readSoon(seq), READ_SOON_MS);
    try {
      await this.appliedTo(seq, ms);
    } finally {
      clearInterval(hurry);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.follower.stop();
    await Promise.allSettled(this.pending.values());
    for (const waiter of this.waiters) waiter.resolve();
    this.waiters = [];
  }

  private moved(): void {
    if (this.waiters.length === 0) return;
    const at = this.appliedSeq;
    const still: typeof this.waiters = [];
    for (const waiter of this.waiters) waiter.seq <= at ? waiter.resolve() : still.push(waiter);
    this.waiters = still;
  }

  /** Starts following; ready once the entries the log had when it started are applied (asked again while the log does not answer). */
  private async catchUp(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (this.stopped) throw new PartitionGivenUpError(this.partition);
      try {
        const last = await this.options.lastSeq();
        // (given up while the log was asked: a follower started now would apply the partition's entries
        // after its rows were dropped, for a partition this node no longer holds)
        if (this.stopped) throw new PartitionGivenUpError(this.partition);
        this.catchUpTo = last;
        if (attempt === 0 || !this.followerStarted) {
          await this.follower.start();
          this.followerStarted = true;
        }
        for (;;) {
          const before = this.appliedSeq;
          await this.appliedTo(last, 1_000);
          if (this.appliedSeq >= last) break;
          if (this.stopped) throw new PartitionGivenUpError(this.partition);
          // Nothing came for a second while entries are missing: a consumer made while the JetStream
          // cluster was getting over a lost server can deliver nothing (cluster/README.md, What is left,
          // 14); the rest is read from the stream rather than waiting for the stall check.
          if (this.appliedSeq === before) this.follower.readSoon(last);
        }
        this.isReady = true;
        return;
      } catch (error) {
        if (this.stopped) throw new PartitionGivenUpError(this.partition);
        if (attempt === 0) this.options.onError(`could not catch partition ${this.partition} up with the log yet; trying again`, error);
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
      }
    }
  }

  private followerStarted = false;
}

/** TX entries of one partition applied side by side at most while following. */
const MAX_PENDING = 256;

/**
 * How long an append waits for its own entry from the consumer before the follower reads it from the
 * stream (ownEntryApplied): far above a working consumer's delivery, far below the 2 s an append waited
 * in the failover after a lost nats-server, entry after entry, while consumers could not be made.
 */
const READ_SOON_MS = 500;
