import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { unavailable } from '../../domain/errors.js';
import { withinMs } from '../../domain/within-ms.js';
import { PartitionCopy } from './partition-copy.js';
import type { FollowedMessage } from './stream-follower.js';
import type { JetStreamTransitionLog } from './transition-log.js';

/** How long a partition's follower waits for JetStream to answer a question (StreamFollower asks again). */
const FOLLOW_QUESTION_MS = 1_000;

/** A partition's applied position, as one copy of it said (HeldPartitions.appliedMarks). */
export interface AppliedMark {
  partition: number;
  seq: number;
  copy: object;
}

interface HeldPartitionsOptions {
  log: JetStreamTransitionLog;
  /** Applies one entry a partition's follower received. */
  apply: (message: FollowedMessage) => Promise<void>;
  /** Drops every row of the partitions given up from the local store (their followers stopped first). */
  drop: (partitions: ReadonlySet<number>) => Promise<void>;
  onError: (message: string, error: unknown) => void;
}

/**
 * The partitions a cluster node holds (design.md §6.2), each with its follower and watermark
 * (PartitionCopy): which they are, how far each is applied and whether it is caught up. Holding a new
 * set starts followers for the partitions taken and stops, then drops, the ones given up.
 */
export class HeldPartitions {
  private readonly copies = new Map<number, PartitionCopy>();
  private js: JetStreamClient | undefined;
  /** Partitions given up whose rows are still being dropped from the store. */
  private dropping: Promise<void> = Promise.resolve();

  constructor(private readonly options: HeldPartitionsOptions) {}

  /** The copy of a partition held here, or undefined. */
  get(partition: number): PartitionCopy | undefined {
    return this.copies.get(partition);
  }

  has(partition: number): boolean {
    return this.copies.has(partition);
  }

  /**
   * Makes `partitions` the ones held: a partition newly held gets a follower from `from(partition)`
   * (the first stream sequence not applied here; 1 when this copy holds none of it) and is ready once
   * caught up with the log; one given up loses its follower and its rows. The first time, rows of every
   * partition not held now go (a node that restarts may have held others).
   */
  hold(nc: NatsConnection, partitions: ReadonlySet<number>, from: (partition: number) => number): void {
    const { log, apply, drop, onError } = this.options;
    const first = this.js === undefined;
    // A short timeout for the followers' questions (making a consumer, reading an entry): while one
    // cannot be made, a follower reads the partition's entries instead, and tries again (StreamFollower).
    const js = (this.js ??= jetstream(nc, { timeout: FOLLOW_QUESTION_MS }));
    const given = [...this.copies.values()].filter((copy) => !partitions.has(copy.partition));
    for (const copy of given) this.copies.delete(copy.partition);
    // Stopped now, not after the drops before them: a copy given up applies nothing more.
    const stopping = given.map((copy) => copy.stop());
    for (const partition of partitions) {
      if (this.copies.has(partition)) continue;
      this.copies.set(
        partition,
        new PartitionCopy({
          partition,
          js,
          stream: log.stream,
          filter: log.partitionSubject(partition),
          from: from(partition),
          lastSeq: () => log.lastSeqOfPartition(partition),
          apply,
          onError,
        }),
      );
    }
    const dropped = new Set(given.map((copy) => copy.partition));
    if (first) for (let partition = 0; partition < log.partitions; partition++) if (!partitions.has(partition)) dropped.add(partition);
    if (dropped.size === 0) return;
    this.dropping = this.dropping
      .then(async () => {
        await Promise.all(stopping);
        await drop(dropped);
      })
      .catch((error: unknown) => onError(`could not drop partitions ${[...dropped].join(', ')} from the local store`, error));
  }

  /** Stops every follower, and waits for the drops under way. */
  async stop(): Promise<void> {
    await Promise.all([...this.copies.values()].map((copy) => copy.stop()));
    await this.dropping;
  }

  /** By partition held: the stream sequence up to which its entries are applied here (for a restart to resume from). */
  appliedPositions(): Record<number, number> {
    const positions: Record<number, number> = {};
    for (const [partition, copy] of this.copies) positions[partition] = copy.appliedSeq;
    return positions;
  }

  /**
   * By partition held: its applied position now, and the copy that says so (see stillHolds): a
   * position to checkpoint once the local store has synced what it names.
   */
  appliedMarks(): AppliedMark[] {
    return [...this.copies.values()].map((copy) => ({ partition: copy.partition, seq: copy.appliedSeq, copy }));
  }

  /** Whether the copy that gave `mark` still holds its partition (not given up since, or given up and taken again). */
  stillHolds(mark: AppliedMark): boolean {
    return this.copies.get(mark.partition) === mark.copy;
  }

  /** The partitions held, and whether each is caught up. */
  list(): Array<{ partition: number; ready: boolean; appliedSeq: number }> {
    return [...this.copies.values()]
      .map((copy) => ({ partition: copy.partition, ready: copy.ready, appliedSeq: copy.appliedSeq }))
      .sort((a, b) => a.partition - b.partition);
  }

  /**
   * How far the partitions held are caught up (a starting node's progress lines): how many are ready,
   * and the span of the log applied of the span to catch up, summed over the partitions.
   */
  catchUpProgress(): { ready: number; held: number; done: number; total: number } {
    let ready = 0;
    let done = 0;
    let total = 0;
    for (const copy of this.copies.values()) {
      if (copy.ready) ready++;
      const { from, applied, to } = copy.catchUpSpan();
      if (to === undefined || to <= from) continue;
      total += to - from;
      done += Math.min(Math.max(applied - from, 0), to - from);
    }
    return { ready, held: this.copies.size, done, total };
  }

  /** Resolves once every partition held is caught up (within `ms`, else a 503): before a node answers for all it holds. */
  async allReady(ms: number): Promise<void> {
    const waiting = [...this.copies.values()].filter((copy) => !copy.ready);
    if (waiting.length === 0) return;
    await withinMs(Promise.all(waiting.map((copy) => copy.whenReady())), ms, () =>
      unavailable(`this node is still catching up ${waiting.length} partitions with the cluster's log; retry`),
    );
  }
}
