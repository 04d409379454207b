import type { Database, RootDatabase } from 'lmdb';
import { unavailable } from '../../domain/errors.js';
import { tooDeep } from '../../domain/json-depth.js';
import { type SplicedJson, stringifyWithKnownField } from '../../domain/json-texts.js';
import type { InstanceHead, TransitionRecord } from '../instance-store.js';
import { asJsonValue } from './json-values.js';
import { UnappliedCommits } from './unapplied-commits.js';
import type { Progress } from '../../domain/progress.js';
import { DEFAULT_SEGMENT_BYTES, WriteAheadLog } from './write-ahead-log.js';

type HeadKey = [string, string, string];
type HeadsDb = Database<InstanceHead, HeadKey>;
type TransitionsDb = Database<TransitionRecord, [string, string, string, number]>;

/**
 * Entries LMDB derives from a head (secondary indexes, the due-time index): `replace` queues, in the
 * write the caller is inside, what takes them from `previous`'s to `next`'s.
 */
interface HeadEntries {
  replace(previous: InstanceHead | undefined, next: InstanceHead | undefined): void;
}

/** In the `wal` db (entry versions): its version is the last log frame LMDB holds. */
const APPLIED_KEY = 'applied';

/**
 * How long commits from the log wait before their LMDB writes are queued, gathering into one LMDB
 * transaction. Each LMDB transaction costs page writes and two flushes on LMDB's thread. Queued
 * after every frame, they competed for the two cores with the next event (at concurrency 1 the log
 * then gained 0.08 ms instead of 0.3); held 200 ms or 1 s at 64 in flight, one transaction took so
 * long to flush that the frames waiting behind it made p99 30 and 70 ms. Nothing waits for them:
 * reads get the commits meanwhile from `unapplied`, and a crash applies them from the log.
 */
const DEFAULT_APPLY_DELAY_MS = 20;
/** ... unless this many commits are waiting (lmdb-js then holds them, with its own back-pressure). */
const APPLY_AT_COMMITS = 2000;

/**
 * A frame of one commit is written on this thread unless commits overlapped this recently: then on
 * libuv's pool, so that this thread does not wait for the disk while others are in flight.
 */
const BUSY_WINDOW_MS = 10;

/** A frame holds at most about this many characters of commits (the rest go in the next frame). */
const MAX_FRAME_CHARS = 16 * 1024 * 1024;

/** The claim of a write that goes to LMDB directly: no sequence number equals it, so no other writer passes. */
const DIRECT = -1;

/** The most instances `landedSeqs` remembers; past it, it starts afresh (each takes ≈ 100 bytes). */
const LANDED_MAX = 100_000;

/** Values nest at most this deep to be encoded safely (msgpackr recurses; see domain/json-depth.ts). */
const MAX_ENCODABLE_DEPTH = 1000;

/** A commit of an instance's head and history (no messages): what goes through the log. */
interface HeadCommit {
  key: string;
  head: InstanceHead;
  records: TransitionRecord[];
  /** The head it replaces; none for a create. */
  previous: InstanceHead | undefined;
  /** What the log frame holds of it (commitTexts). */
  texts: CommitTexts;
}

/** A commit as JSON: its head, and each record of its history. */
export interface CommitTexts {
  head: string;
  records: string[];
}

interface Waiting extends HeadCommit {
  resolve: (written: boolean) => void;
  reject: (error: unknown) => void;
}

interface WalCommitsOptions {
  dir: string;
  segmentBytes?: number;
  /**
   * Default true: a commit is acknowledged once its frame is durable. False: once it is written, and
   * `sync` makes the frames written so far durable (a cluster's local copy, which JetStream makes durable).
   */
  syncFrames?: boolean;
  /** How long log commits wait before their LMDB writes are queued (tests hold them back). */
  applyDelayMs?: number;
  /** LMDB could not take writes the log acknowledged: the node must stop writing and be restarted. */
  onFailure?: (error: Error) => void;
  /** Told how far the replay at start is (only a long one says anything: domain/progress.ts). */
  replayProgress?: ReplayProgress;
}

/** Starts the progress of a replay (its steps count frames). */
export type ReplayProgress = () => Progress;

const keyOf = (head: InstanceHead): HeadKey => [head.orgId, head.machine, head.name];

/**
 * The commit as JSON, if LMDB can surely take it afterwards; undefined otherwise (the caller then
 * commits to LMDB directly, where a value that cannot be encoded fails its commit alone). These texts
 * make the log frame, and LMDB stores them as they are (json-values.ts).
 */
export const commitTexts = (head: InstanceHead, records: TransitionRecord[]): CommitTexts | undefined => {
  let texts: CommitTexts;
  let headJson: SplicedJson;
  try {
    // (the context as the step's result gave it, when it did: one encoding of it per event)
    headJson = stringifyWithKnownField(head, 'context');
    texts = { head: headJson.text, records: records.map((record) => JSON.stringify(record)) };
  } catch {
    return undefined;
  }
  // In a frame a head is one level down ([commit, …] → [head, records]) and a record two. A context
  // spliced in from a step was checked by the sandbox: only the rest of the head is scanned.
  const headLimit = MAX_ENCODABLE_DEPTH - 2;
  const { spliced } = headJson;
  if (spliced ? spliced.maxDepth + 1 > headLimit || tooDeep(spliced.others, headLimit) : tooDeep(texts.head, headLimit)) return undefined;
  for (const record of texts.records) if (tooDeep(record, MAX_ENCODABLE_DEPTH - 3)) return undefined;
  return texts;
};

/** The characters a commit takes in a frame, for its size limit. */
const frameChars = (texts: CommitTexts): number => {
  let chars = texts.head.length;
  for (const record of texts.records) chars += record.length;
  return chars;
};

/**
 * A frame's payload, the JSON array of its commits as `[head, [record, …]]`, encoded straight into one
 * buffer: joining the texts first would build and copy a string of the whole frame (≈ 30 KB at 64 in
 * flight) only to copy it again.
 */
export const framePayload = (commits: ReadonlyArray<{ texts: CommitTexts }>): Buffer => {
  // [ and ] around all, a comma between commits; per commit `[` head `,[` records with commas `]]`
  let bytes = 2 + Math.max(0, commits.length - 1);
  for (const { texts } of commits) {
    bytes += 5 + Buffer.byteLength(texts.head, 'utf8') + Math.max(0, texts.records.length - 1);
    for (const record of texts.records) bytes += Buffer.byteLength(record, 'utf8');
  }
  const payload = Buffer.allocUnsafe(bytes);
  let at = 0;
  payload[at++] = 0x5b; // [
  for (let c = 0; c < commits.length; c++) {
    const { texts } = commits[c] as { texts: CommitTexts };
    if (c > 0) payload[at++] = 0x2c; // ,
    payload[at++] = 0x5b;
    at += payload.write(texts.head, at, 'utf8');
    payload[at++] = 0x2c;
    payload[at++] = 0x5b;
    for (let r = 0; r < texts.records.length; r++) {
      if (r > 0) payload[at++] = 0x2c;
      at += payload.write(texts.records[r] as string, at, 'utf8');
    }
    payload[at++] = 0x5d; // ]
    payload[at++] = 0x5d;
  }
  payload[at] = 0x5d;
  return payload;
};

/**
 * Head-and-history commits (the usual event), made durable by the write-ahead log, then written to
 * LMDB behind it.
 *
 * - The commits asked for in one turn of the event loop, and those asked while the previous frame is
 *   being written, share a frame: one O_DSYNC write, where LMDB's own commit writes a few pages per
 *   instance and flushes twice. A frame of one commit, when commits have not overlapped lately, is
 *   written on this thread: at concurrency 1 that saves two thread hand-offs (an event goes from
 *   ≈ 1.2 to ≈ 0.9 ms here). At 64 in flight the log gives ≈ 6 % more events/s than LMDB's group
 *   commit, p50 ≈ 1 ms lower (alternating runs).
 * - Each commit is checked against the latest head, counting commits not yet in LMDB (fencing), and
 *   claims its place until its frame is durable.
 * - A commit is acknowledged once its frame is durable; reads get it from `unapplied` until its LMDB
 *   writes land. Those are queued in batches (DEFAULT_APPLY_DELAY_MS), and at once before any other
 *   write to LMDB (`applyNow`): lmdb-js keeps its async writes in order, so what is queued later lands
 *   after them.
 * - Each batch lands together with the `applied` entry moving to its last frame, and only if it was
 *   at the frame before its first: LMDB holds an unbroken prefix of the log, and on start the frames
 *   after it are applied again (they are whole puts: applying one twice is harmless). Segments whose
 *   frames LMDB holds durably are deleted.
 */
export class WalCommits {
  readonly unapplied = new UnappliedCommits();
  /** Commits gathering or being written, not yet durable: their sequence numbers, for fencing. */
  private readonly claims = new Map<string, number>();
  /**
   * The head sequence LMDB holds of instances whose log commits landed there, so that fencing the
   * next commit does not read LMDB (a read per event was ≈ 4 % of the main thread at 64 in flight).
   * Only the log's batches add to it, as they land, in order. A write that goes to LMDB directly drops
   * its instance when it is queued (behind every batch queued so far, which land before it) and again
   * when it settled, so LMDB is read for that instance until its next batch lands.
   */
  private readonly landedSeqs = new Map<string, number>();
  private readonly wal: WriteAheadLog;
  private readonly walDb: Database<boolean, string>;
  private gathering: Waiting[] = [];
  private flushScheduled = false;
  /** A frame is being written on libuv's pool. */
  private writing = false;
  /** When commits last overlapped (performance.now()). */
  private lastOverlapAt = -Infinity;
  /** Log frames whose LMDB writes are not queued yet, oldest first. */
  private toApply: Array<{ seq: number; commits: HeadCommit[] }> = [];
  private toApplyCommits = 0;
  private applyTimer: NodeJS.Timeout | undefined;
  private lastApply: Promise<unknown> = Promise.resolve();
  /** The last frame whose LMDB writes were queued: `applied` reaches it once they all land. */
  private lastQueued: number;
  private broken: Error | undefined;
  private closing = false;
  private closed = false;
  private drained: Array<() => void> = [];

  constructor(
    root: RootDatabase,
    private readonly heads: HeadsDb,
    private readonly transitions: TransitionsDb,
    private readonly derived: HeadEntries[],
    private readonly options: WalCommitsOptions,
  ) {
    this.walDb = openWalDb(root);
    const applied = WalCommits.recover(root, heads, transitions, derived, options.dir, options.replayProgress);
    this.lastQueued = applied;
    this.wal = WriteAheadLog.start(options.dir, applied + 1, options.segmentBytes ?? DEFAULT_SEGMENT_BYTES, {
      syncFrames: options.syncFrames ?? true,
    });
  }

  /** Makes every commit acknowledged so far durable in the log (see WalCommitsOptions.syncFrames). */
  sync(): Promise<void> {
    return this.wal.sync();
  }

  /**
   * Applies what the log holds beyond LMDB's last applied frame, durably, before anything reads.
   * Runs whether or not the node uses the log now (it may have before a crash). Returns the last frame
   * LMDB holds. Index and timer entries move from the head LMDB holds (a read inside the transaction
   * sees the frames applied before) to the frame's.
   */
  static recover(
    root: RootDatabase,
    heads: HeadsDb,
    transitions: TransitionsDb,
    derived: HeadEntries[],
    dir: string,
    replayProgress?: ReplayProgress,
  ): number {
    const walDb = openWalDb(root);
    let applied = walDb.getEntry(APPLIED_KEY)?.version ?? 0;
    const frames = WriteAheadLog.read(dir, applied).filter((frame) => frame.seq > applied);
    const first = frames[0];
    if (first && first.seq !== applied + 1) {
      throw new Error(
        `the write-ahead log in ${dir} starts at frame ${first.seq} but LMDB holds frames up to ${applied}: frames are missing (to start anyway, move ${dir} aside: the commits it holds are then lost)`,
      );
    }
    const last = frames.at(-1);
    const told = frames.length > 0 ? replayProgress?.() : undefined;
    root.transactionSync(() => {
      for (const [index, frame] of frames.entries()) {
        for (const [head, records] of JSON.parse(frame.payload.toString('utf8')) as Array<[InstanceHead, TransitionRecord[]]>) {
          const stored = heads.get(keyOf(head));
          for (const entries of derived) entries.replace(stored, head);
          putCommit(heads, transitions, head, records);
        }
        told?.step(index + 1, frames.length);
      }
      if (last) applied = last.seq;
      void walDb.put(APPLIED_KEY, true, applied);
    });
    told?.end(frames.length);
    return applied;
  }

  /** The latest head sequence of an instance, counting commits not yet in LMDB; undefined if none. */
  latestSeq(key: string, head: InstanceHead): number | undefined {
    return this.knownSeq(key) ?? this.heads.getEntry(keyOf(head))?.version;
  }

  /** Whether an instance's latest head, counting commits not yet in LMDB, is at `seq` (without decoding it). */
  isAt(key: string, head: InstanceHead, seq: number): boolean {
    const known = this.knownSeq(key);
    return known !== undefined ? known === seq : this.heads.doesExist(keyOf(head), seq);
  }

  /** Whether a head exists, counting commits not yet in LMDB. */
  exists(key: string, head: InstanceHead): boolean {
    return this.knownSeq(key) !== undefined || this.heads.getBinary(keyOf(head)) !== undefined;
  }

  /**
   * Resolves with true once the commit is durable, with false (nothing written) if the head is not
   * where the commit says: the name exists (a create), or the latest head is not `previous`.
   */
  write(commit: HeadCommit): Promise<boolean> {
    const refused = this.unwritable();
    if (refused) return Promise.reject(refused);
    const { key, head, previous } = commit;
    if (previous ? !this.isAt(key, head, previous.seq) : this.exists(key, head)) return Promise.resolve(false);
    this.claims.set(key, head.seq);
    if (this.writing || this.gathering.length > 0) this.lastOverlapAt = performance.now();
    return new Promise((resolve, reject) => {
      this.gathering.push({ ...commit, resolve, reject });
      if (!this.flushScheduled && !this.writing) {
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
    this.lastQueued = last;
    let thrown: unknown;
    const landed = this.walDb.ifVersion(APPLIED_KEY, first - 1, () => {
      try {
        for (const frame of frames) {
          for (const commit of frame.commits) {
            putCommitTexts(this.heads, this.transitions, commit);
            // (`previous` is what LMDB holds by then: the commit was fenced against it)
            for (const entries of this.derived) entries.replace(commit.previous, commit.head);
          }
        }
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
        if (this.landedSeqs.size > LANDED_MAX) this.landedSeqs.clear();
        for (const frame of frames) {
          for (const commit of frame.commits) {
            this.unapplied.landed(commit.key, commit.head.seq);
            this.landedSeqs.set(commit.key, commit.head.seq);
          }
        }
        if (!this.closed) this.wal.release(last);
      },
      (error: unknown) => this.fail(error instanceof Error ? error : new Error(String(error))),
    );
  }

  /** Drops what is known of an instance's unapplied commits (after a write that went to LMDB directly). */
  forget(key: string): void {
    this.unapplied.forget(key);
  }

  /**
   * A write of an instance's head that goes to LMDB directly (`block` queues it, as a conditional
   * block of lmdb-js): queued after the log's commits, claimed while in flight so that no log commit
   * of the instance passes meanwhile, and conditional on LMDB holding every frame queued before it. If
   * a batch of frames did not land, this write must not land either: a restart applies those frames
   * again, and would apply them over it. The caller checks fencing first (isAt, exists).
   */
  async direct<R>(key: string, block: () => Promise<R>): Promise<R> {
    const guard = this.beforeDirect(key);
    try {
      let inner: Promise<R> | undefined;
      const afterFrames = await this.walDb.ifVersion(APPLIED_KEY, guard.expected, () => {
        inner = block();
      });
      if (!afterFrames) guard.framesMissing();
      return await (inner as Promise<R>);
    } finally {
      guard.done();
    }
  }

  /**
   * For a write that goes to LMDB directly as an async transaction callback (and for `direct`): call
   * before queuing it; inside the callback, `framesLanded` says whether LMDB holds every frame queued
   * before it (`expected`; if not, write nothing and call `framesMissing`); `done` once it settled.
   *
   * Frames queued after it may have landed too: lmdb-js runs the asynchronous transaction callbacks
   * it has queued after the single writes it has queued (its README, "strictAsyncOrder"), so while
   * its writer is busy, a batch of frames queued after this write lands before the callback runs. That
   * is harmless (the instance is claimed: none of its commits is among them), and was taken for missing
   * frames until 2026-11-29, which broke the store (every write then refused until a restart).
   */
  beforeDirect(key: string): { expected: number; framesLanded: () => boolean; framesMissing: () => never; done: () => void } {
    this.checkWritable();
    this.applyNow();
    this.claims.set(key, DIRECT);
    this.landedSeqs.delete(key);
    const expected = this.lastQueued;
    return {
      expected,
      framesLanded: () => (this.walDb.getEntry(APPLIED_KEY)?.version ?? 0) >= expected,
      framesMissing: () => {
        this.fail(new Error(`LMDB does not hold the write-ahead log's frames up to ${expected}`));
        throw this.unwritable();
      },
      done: () => {
        if (this.claims.get(key) === DIRECT) this.claims.delete(key);
        this.landedSeqs.delete(key);
      },
    };
  }

  /** Refuses writes once LMDB failed to take the log's frames, or the store is closing. */
  checkWritable(): void {
    const error = this.unwritable();
    if (error) throw error;
  }

  /**
   * Refuses new commits, waits for those asked for so far to be durable and in LMDB, then deletes
   * the log's segments.
   */
  async close(): Promise<void> {
    this.closing = true;
    if (this.flushScheduled || this.writing || this.gathering.length > 0) await new Promise<void>((resolve) => this.drained.push(resolve));
    this.applyNow();
    clearTimeout(this.applyTimer);
    this.closed = true;
    await this.lastApply;
    await this.wal.close(this.broken === undefined);
  }

  /** Why writes are refused since LMDB failed to take the log's frames; undefined otherwise (also while closing). */
  refusal(): Error | undefined {
    return this.broken ? this.unwritable() : undefined;
  }

  private unwritable(): Error | undefined {
    if (this.broken)
      return unavailable(`storage failed (${this.broken.message}): restart the node; acknowledged writes are kept in its write-ahead log`);
    if (this.closing) return stopping();
    return undefined;
  }

  /**
   * An instance's latest head sequence as known without reading LMDB: a commit in flight (DIRECT for
   * LMDB's own), one not yet in LMDB, or the last one the log landed there; undefined otherwise.
   */
  private knownSeq(key: string): number | undefined {
    return this.claims.get(key) ?? this.unapplied.head(key)?.seq ?? this.landedSeqs.get(key);
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (this.writing) return;
    const batch = this.takeFrame();
    if (batch.length === 0) {
      for (const wake of this.drained.splice(0)) wake();
      return;
    }
    const payload = framePayload(batch);
    if (batch.length === 1 && performance.now() - this.lastOverlapAt > BUSY_WINDOW_MS) {
      let seq: number;
      try {
        seq = this.wal.appendSync(payload);
      } catch (error) {
        this.failed(batch, error);
        return;
      }
      this.durable(batch, seq);
      return;
    }
    this.lastOverlapAt = performance.now();
    this.writing = true;
    this.wal.append(payload).then(
      (seq) => this.durable(batch, seq),
      (error: unknown) => this.failed(batch, error),
    );
  };

  /** The gathered commits that fit in one frame (at least one), oldest first. */
  private takeFrame(): Waiting[] {
    let chars = 0;
    let count = 0;
    while (count < this.gathering.length) {
      const next = frameChars((this.gathering[count] as Waiting).texts);
      if (count > 0 && chars + next > MAX_FRAME_CHARS) break;
      chars += next;
      count++;
    }
    return this.gathering.splice(0, count);
  }

  private durable(batch: Waiting[], seq: number): void {
    this.writing = false;
    for (const commit of batch) {
      this.unclaim(commit);
      this.unapplied.add(commit.key, commit.head, commit.records);
    }
    this.toApply.push({ seq, commits: batch });
    this.toApplyCommits += batch.length;
    if (this.toApplyCommits >= APPLY_AT_COMMITS) this.applyNow();
    else if (!this.applyTimer) {
      this.applyTimer = setTimeout(() => this.applyNow(), this.options.applyDelayMs ?? DEFAULT_APPLY_DELAY_MS);
      this.applyTimer.unref();
    }
    for (const commit of batch) commit.resolve(true);
    this.flush();
  }

  /** The frame was not written: its commits fail, with nothing applied; the next frame takes its place. */
  private failed(batch: Waiting[], error: unknown): void {
    this.writing = false;
    for (const commit of batch) {
      this.unclaim(commit);
      commit.reject(error);
    }
    this.flush();
  }

  private unclaim(commit: HeadCommit): void {
    if (this.claims.get(commit.key) === commit.head.seq) this.claims.delete(commit.key);
  }

  private fail(error: Error): void {
    if (this.broken) return;
    this.broken = error;
    this.options.onFailure?.(error);
  }
}

const stopping = (): Error => unavailable('the node is stopping: writes are no longer taken');

const openWalDb = (root: RootDatabase): Database<boolean, string> => root.openDB({ name: 'wal', encoding: 'msgpack', useVersions: true });

/** The LMDB writes of a head-and-history commit (the head carries its sequence as entry version). */
const putCommit = (heads: HeadsDb, transitions: TransitionsDb, head: InstanceHead, records: TransitionRecord[]): void => {
  void heads.put(keyOf(head), head, head.seq);
  for (const record of records) void transitions.put([head.orgId, head.machine, head.name, record.seq], record);
};

/** The same writes, of the JSON texts the commit's frame was made of (not encoded again). */
const putCommitTexts = (heads: HeadsDb, transitions: TransitionsDb, { head, records, texts }: HeadCommit): void => {
  void heads.put(keyOf(head), asJsonValue<InstanceHead>(texts.head), head.seq);
  for (let r = 0; r < records.length; r++) {
    void transitions.put(
      [head.orgId, head.machine, head.name, (records[r] as TransitionRecord).seq],
      asJsonValue<TransitionRecord>(texts.records[r] as string),
    );
  }
};
