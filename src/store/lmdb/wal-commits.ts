import type { Database, RootDatabase } from 'lmdb';
import { jsonDepth } from '../../domain/json-depth.js';
import type { InstanceHead, TransitionRecord } from '../instance-store.js';
import { UnappliedCommits } from './unapplied-commits.js';
import { DEFAULT_SEGMENT_BYTES, WriteAheadLog } from './write-ahead-log.js';

type HeadKey = [string, string, string];
type HeadsDb = Database<InstanceHead, HeadKey>;
type TransitionsDb = Database<TransitionRecord, [string, string, string, number]>;

/** In the `wal` db (entry versions): its version is the last log frame LMDB holds. */
const APPLIED_KEY = 'applied';

/**
 * How long commits from the log wait before their LMDB writes are queued, gathering into one LMDB
 * transaction. Each LMDB transaction costs page writes and two flushes on LMDB's thread: queued after
 * every frame, they competed for the two cores with the next event (at concurrency 1 they delayed
 * its sandbox step, and the log gained 0.08 ms instead of 0.3). Nothing waits for them: reads get
 * the commits meanwhile from `unapplied`, and a crash applies them from the log.
 */
export const DEFAULT_APPLY_DELAY_MS = 20;
/** ... unless this many commits are waiting (bounds `unapplied` under load). */
const APPLY_AT_COMMITS = 2000;

/** A commit of an instance's head and history (no messages, timers unchanged): what may go through the log. */
export interface HeadCommit {
  key: string;
  head: InstanceHead;
  records: TransitionRecord[];
  /** The head it replaces; none for a create. */
  previous: InstanceHead | undefined;
}

interface Waiting extends HeadCommit {
  /** false: the head was not where the commit says (a create of a name that exists, a stale previous head). */
  resolve: (written: boolean) => void;
  reject: (error: unknown) => void;
}

/**
 * A lone commit this soon after commits overlapped goes to LMDB too: under load, gaps between LMDB's
 * transactions let lone commits through, whose log writes then blocked this thread (≈ 4 % of it at 64
 * in flight) and whose LMDB writes made small transactions of their own.
 */
const BUSY_WINDOW_MS = 10;

/** Values nest at most this deep to be encoded safely (msgpackr recurses; see domain/json-depth.ts). */
const MAX_ENCODABLE_DEPTH = 1000;

export interface WalCommitsOptions {
  dir: string;
  segmentBytes?: number;
  /** How long log commits wait before their LMDB writes are queued (tests hold them back). */
  applyDelayMs?: number;
  /** LMDB could not take writes the log acknowledged: the node must stop writing and be restarted. */
  onFailure?: (error: Error) => void;
}

const keyOf = (head: InstanceHead): HeadKey => [head.orgId, head.machine, head.name];

/**
 * Head-and-history commits, made durable by the write-ahead log when that is faster, else by LMDB.
 *
 * - A commit alone in its turn of the event loop, with no other commit in flight, is written to the
 *   log on this thread: one O_DSYNC write (≈ 0.13 ms here), where LMDB would hand it to its thread,
 *   write pages and flush twice. At concurrency 1 this takes an event from ≈ 1.2 to ≈ 0.9 ms.
 * - A commit that is not alone goes to LMDB at once, into its next batched synced transaction with
 *   the others, as without the log. Measured at 64 in flight with every commit through the log,
 *   frames waited behind LMDB's page write-back (p50 1.2 ms, p99 9.5 ms: no better than LMDB's own
 *   group commit) and writing everything twice cost ≈ 25 µs more CPU per event on this thread.
 * - A commit from the log is acknowledged once its frame is durable; reads get it from `unapplied`
 *   until its LMDB writes land. Those are queued in batches (DEFAULT_APPLY_DELAY_MS), and at once
 *   before any other write to LMDB (`applyNow`): lmdb-js keeps its async writes in order, so what is
 *   queued later lands after them.
 * - Each batch lands together with the `applied` entry moving to its last frame, and only if it was
 *   at the frame before its first: LMDB holds an unbroken prefix of the log, and on start the frames
 *   after it are applied again (they are whole puts: applying one twice is harmless). Segments whose
 *   frames LMDB holds durably are deleted.
 */
export class WalCommits {
  readonly unapplied = new UnappliedCommits();
  /** Commits written or being written but not yet durable: sequence numbers for the fencing check. */
  private readonly claims = new Map<string, number>();
  private readonly wal: WriteAheadLog;
  private readonly walDb: Database<boolean, string>;
  private gathering: Waiting[] = [];
  private flushScheduled = false;
  /** Commits handed to LMDB directly whose transaction is not durable yet. */
  private direct = 0;
  /** When a commit last came while others were in flight (performance.now()). */
  private lastConcurrentAt = -Infinity;
  /** Log frames whose LMDB writes are not queued yet, oldest first. */
  private toApply: Array<{ seq: number; commits: HeadCommit[] }> = [];
  private toApplyCommits = 0;
  private applyTimer: NodeJS.Timeout | undefined;
  private lastApply: Promise<unknown> = Promise.resolve();
  private broken: Error | undefined;
  private drained: Array<() => void> = [];

  constructor(
    root: RootDatabase,
    private readonly heads: HeadsDb,
    private readonly transitions: TransitionsDb,
    private readonly options: WalCommitsOptions,
  ) {
    this.walDb = openWalDb(root);
    const applied = WalCommits.recover(root, heads, transitions, options.dir);
    this.wal = WriteAheadLog.start(options.dir, applied + 1, options.segmentBytes ?? DEFAULT_SEGMENT_BYTES);
  }

  /**
   * Applies what the log holds beyond LMDB's last applied frame, durably, before anything reads.
   * Runs whether or not the node uses the log now (it may have before a crash). Returns the last frame
   * LMDB holds.
   */
  static recover(root: RootDatabase, heads: HeadsDb, transitions: TransitionsDb, dir: string): number {
    const walDb = openWalDb(root);
    let applied = walDb.getEntry(APPLIED_KEY)?.version ?? 0;
    const frames = WriteAheadLog.read(dir).filter((frame) => frame.seq > applied);
    const first = frames[0];
    if (first && first.seq !== applied + 1) {
      throw new Error(`the write-ahead log in ${dir} starts at frame ${first.seq} but LMDB holds frames up to ${applied}: frames are missing`);
    }
    const last = frames.at(-1);
    root.transactionSync(() => {
      for (const frame of frames) {
        for (const [head, records] of JSON.parse(frame.payload.toString('utf8')) as Array<[InstanceHead, TransitionRecord[]]>) {
          putCommit(heads, transitions, head, records);
        }
      }
      if (last) applied = last.seq;
      void walDb.put(APPLIED_KEY, true, applied);
    });
    return applied;
  }

  /** Why LMDB could not take acknowledged writes, once that happened. */
  get failure(): Error | undefined {
    return this.broken;
  }

  /** The latest head sequence of an instance, counting commits not yet in LMDB; undefined if none. */
  latestSeq(key: string, head: InstanceHead): number | undefined {
    const claimed = this.claims.get(key);
    if (claimed !== undefined) return claimed;
    const pending = this.unapplied.head(key);
    if (pending) return pending.seq;
    return this.heads.getEntry(keyOf(head))?.version;
  }

  /** Whether an instance's latest head, counting commits not yet in LMDB, is at `seq` (without decoding it). */
  isAt(key: string, head: InstanceHead, seq: number): boolean {
    const claimed = this.claims.get(key);
    if (claimed !== undefined) return claimed === seq;
    const pending = this.unapplied.head(key);
    if (pending) return pending.seq === seq;
    return this.heads.doesExist(keyOf(head), seq);
  }

  /** Whether a head exists, counting commits not yet in LMDB. */
  exists(key: string, head: InstanceHead): boolean {
    return this.claims.has(key) || this.unapplied.head(key) !== undefined || this.heads.getBinary(keyOf(head)) !== undefined;
  }

  /**
   * Resolves with true once the commit is durable (in the log or in LMDB), with false if the head was
   * not where the commit says: the name exists (create), or the latest head, counting commits not yet
   * in LMDB, is not `previous` (fencing; for LMDB's own commits, checked on its writer thread).
   */
  write(commit: HeadCommit): Promise<boolean> {
    if (this.broken) return Promise.reject(this.broken);
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { key: commit.key, head: commit.head, records: commit.records, previous: commit.previous, resolve, reject };
      const concurrent = this.direct > 0 || this.gathering.length > 0;
      if (concurrent) this.lastConcurrentAt = performance.now();
      if (concurrent || performance.now() - this.lastConcurrentAt < BUSY_WINDOW_MS) {
        // Not alone: straight into LMDB's batch with the others, in this turn, in the order asked.
        const earlier = this.gathering;
        this.gathering = [];
        for (const commit of earlier) this.unclaim(commit);
        this.toLmdb([...earlier, waiting]);
        return;
      }
      // Alone so far: wait for the end of this turn to know whether it stays alone.
      this.claims.set(commit.key, commit.head.seq);
      this.gathering.push(waiting);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  /**
   * Queues the LMDB writes of every durable commit now: call before writing anything else to LMDB, so
   * that write lands after them.
   */
  applyNow(): void {
    clearTimeout(this.applyTimer);
    this.applyTimer = undefined;
    const frames = this.toApply;
    if (frames.length === 0) return;
    this.toApply = [];
    this.toApplyCommits = 0;
    const first = (frames[0] as { seq: number }).seq;
    const last = (frames.at(-1) as { seq: number }).seq;
    let thrown: unknown;
    const landed = this.walDb.ifVersion(APPLIED_KEY, first - 1, () => {
      try {
        for (const frame of frames) for (const commit of frame.commits) putCommit(this.heads, this.transitions, commit.head, commit.records);
        void this.walDb.put(APPLIED_KEY, true, last);
      } catch (error) {
        // Nothing moves `applied` now, so every later batch's condition fails too, and the next start
        // applies the log again from here.
        thrown = error;
      }
    });
    this.lastApply = landed.then(
      (written) => {
        if (thrown !== undefined || !written) {
          const why = thrown instanceof Error ? thrown.message : String(thrown ?? 'they do not follow the last applied frame');
          this.fail(new Error(`LMDB did not take frames ${first} to ${last} of the write-ahead log: ${why}`));
          return;
        }
        for (const frame of frames) for (const commit of frame.commits) this.unapplied.landed(commit.key, commit.head.seq);
        this.wal.release(last);
      },
      (error: unknown) => this.fail(error instanceof Error ? error : new Error(String(error))),
    );
  }

  /** Drops what is known of an instance's unapplied commits (after a write that went to LMDB directly). */
  forget(key: string): void {
    this.unapplied.forget(key);
  }

  /** Waits for the commits asked for so far to be durable and in LMDB, then deletes the log. */
  async close(): Promise<void> {
    if (this.flushScheduled || this.direct > 0) await new Promise<void>((resolve) => this.drained.push(resolve));
    this.applyNow();
    await this.lastApply;
    this.wal.close(this.broken === undefined);
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    const batch = this.gathering;
    this.gathering = [];
    const lone = batch[0];
    if (batch.length === 1 && lone && this.direct === 0) {
      const text = loggable(lone);
      if (text !== undefined) {
        this.unclaim(lone);
        if (lone.previous ? !this.isAt(lone.key, lone.head, lone.previous.seq) : this.exists(lone.key, lone.head)) {
          lone.resolve(false);
          this.wakeDrained();
          return;
        }
        this.toLog(lone, text);
        return;
      }
    }
    for (const commit of batch) this.unclaim(commit);
    if (batch.length > 0) this.toLmdb(batch);
    else this.wakeDrained();
  };

  private toLog(commit: Waiting, text: string): void {
    let seq: number;
    try {
      seq = this.wal.appendSync(Buffer.from(`[${text}]`, 'utf8'));
    } catch (error) {
      commit.reject(error);
      this.wakeDrained();
      return;
    }
    this.unapplied.add(commit.key, commit.head, commit.records);
    this.toApply.push({ seq, commits: [commit] });
    if (++this.toApplyCommits >= APPLY_AT_COMMITS) this.applyNow();
    else if (!this.applyTimer) {
      this.applyTimer = setTimeout(() => this.applyNow(), this.options.applyDelayMs ?? DEFAULT_APPLY_DELAY_MS);
      this.applyTimer.unref();
    }
    commit.resolve(true);
    this.wakeDrained();
  }

  /**
   * Each commit as a conditional block of lmdb-js's next batched transaction, after the log's commits
   * (applyNow); a value that cannot be encoded fails its own commit only, with nothing written.
   */
  private toLmdb(batch: Waiting[]): void {
    this.applyNow();
    for (const commit of batch) {
      const { head, previous, records } = commit;
      let failure: { error: unknown } | undefined;
      const writes = (): void => {
        try {
          putCommit(this.heads, this.transitions, head, records);
        } catch (error) {
          failure = { error };
          undoCommit(this.heads, this.transitions, commit);
        }
      };
      const written = previous ? this.heads.ifVersion(keyOf(head), previous.seq, writes) : this.heads.ifNoExists(keyOf(head), writes);
      this.direct++;
      written.then(
        (ok) => {
          this.directDone();
          if (failure) commit.reject(failure.error);
          else commit.resolve(ok);
        },
        (error: unknown) => {
          this.directDone();
          commit.reject(error);
        },
      );
    }
  }

  private directDone(): void {
    this.direct--;
    this.wakeDrained();
  }

  private unclaim(commit: HeadCommit): void {
    if (this.claims.get(commit.key) === commit.head.seq) this.claims.delete(commit.key);
  }

  private wakeDrained(): void {
    if (this.drained.length > 0 && !this.flushScheduled && this.direct === 0) for (const wake of this.drained.splice(0)) wake();
  }

  private fail(error: Error): void {
    if (this.broken) return;
    this.broken = error;
    this.options.onFailure?.(error);
  }
}

const openWalDb = (root: RootDatabase): Database<boolean, string> => root.openDB({ name: 'wal', encoding: 'msgpack', useVersions: true });

/**
 * The commit as the log holds it, if LMDB can take it afterwards for sure (what it cannot take goes
 * to LMDB first, where the commit fails alone with nothing written).
 */
const loggable = (commit: HeadCommit): string | undefined => {
  let text: string;
  try {
    text = JSON.stringify([commit.head, commit.records]);
  } catch {
    return undefined;
  }
  return jsonDepth(text) <= MAX_ENCODABLE_DEPTH ? text : undefined;
};

/** Puts back what a commit replaced, in the same block, after one of its writes threw. */
const undoCommit = (heads: HeadsDb, transitions: TransitionsDb, commit: HeadCommit): void => {
  const { head, previous, records } = commit;
  try {
    if (previous) void heads.put(keyOf(previous), previous, previous.seq);
    else void heads.remove(keyOf(head));
  } catch {
    // the previous head was written before: it can be written again; nothing else to do
  }
  for (const record of records) void transitions.remove([head.orgId, head.machine, head.name, record.seq]);
};

/** The LMDB writes of a head-and-history commit (the head carries its sequence as entry version). */
const putCommit = (heads: HeadsDb, transitions: TransitionsDb, head: InstanceHead, records: TransitionRecord[]): void => {
  void heads.put(keyOf(head), head, head.seq);
  for (const record of records) void transitions.put([head.orgId, head.machine, head.name, record.seq], record);
};
