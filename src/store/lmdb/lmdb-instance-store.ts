import type { Database, RootDatabase } from 'lmdb';
import { unavailable } from '../../domain/errors.js';
import { compareIndexPositions, type IndexPosition, matchesIndexOp, valuesIn } from '../../domain/index-values.js';
import {
  type CommitEffects,
  type CountedSoFar,
  type DueTimer,
  type IndexQuery,
  type OutboxMessage,
  type InstanceHead,
  type InstanceStore,
  SequenceConflictError,
  type TransitionRecord,
  type UsageDelta,
  type UsageMonth,
  usageMonth,
} from '../instance-store.js';
import { DueTimers, type NewerHeads } from './due-timers.js';
import { IndexEntries } from './index-entries.js';
import { instanceKey } from './unapplied-commits.js';
import { msgpackOrJson } from './json-values.js';
import { commitTexts, type ReplayProgress, WalCommits } from './wal-commits.js';
import { WriteAheadLog } from './write-ahead-log.js';

const AFTER_ALL = '\uffff';

/** In the `meta` db: the heads' format; 2 = heads carry their sequence as their LMDB entry version. */
const HEADS_FORMAT_KEY = 'instances-format';
/** The log position of the last usage count kept (addUsage's `position`), in the `meta` database. */
const USAGE_POSITION_KEY = 'usage-position';
const HEADS_FORMAT = 2;

type HeadKey = [string, string, string];

const keyOf = (head: InstanceHead): HeadKey => [head.orgId, head.machine, head.name];

/**
 * How a commit is made durable before it is acknowledged: `wal`, one write to the write-ahead log
 * (write-ahead-log.ts) with LMDB written right behind it, or `lmdb`, LMDB's own synced transaction.
 */
export type CommitLog = 'wal' | 'lmdb';

export interface InstanceStoreOptions {
  /** The write-ahead log's directory; read at open whatever `commitLog` says (a crash may have left frames). */
  walDir: string;
  /** Default `wal`. */
  commitLog?: CommitLog;
  /** Size of the log's segments (tests make it small to see them rotate). */
  walSegmentBytes?: number;
  /**
   * Default true: a commit through the log is acknowledged once its frame is durable. False: once it is
   * written (readable at once, as always), and `walSynced` makes what was acknowledged durable: a
   * cluster's local copy, which JetStream makes durable and whose checkpoint names only positions made
   * durable here.
   */
  walSyncFrames?: boolean;
  /** How long commits acknowledged from the log wait before LMDB gets them (tests hold them back). */
  walApplyDelayMs?: number;
  /** LMDB failed to take writes the log acknowledged: the node must stop writing and be restarted. */
  onStorageFailure?: (error: Error) => void;
  /** Told how far the log's replay at open is, when it is long. */
  replayProgress?: ReplayProgress;
}

/**
 * LMDB layout:
 *   instances   [orgId, machine, name]      -> InstanceHead, entry version = head.seq
 *                                              (the catalog reads this db's keys for hasInstances)
 *   transitions [orgId, machine, name, seq] -> TransitionRecord
 *   usage       [orgId, 'YYYY-MM']          -> UsageDelta (the org's month)
 *               [orgId, 'YYYY-MM', machine] -> UsageDelta (one machine's share of it)
 *   timers      [dueAt, orgId, machine, name, timerId] -> true   (due-time index of pendingTimers; due-timers.ts)
 *   outbox      position                    -> OutboxMessage  (messages between instances)
 *   inbox       [orgId, machine, name, messageId] -> ts      (messages an instance applied)
 *   indexes     [orgId, machine, index, value, name] -> true (heads' indexValues; index-entries.ts)
 *   wal         'applied' -> true, entry version = the last write-ahead log frame LMDB holds
 *
 * Commits are sequence-checked (fencing): a write names the head it replaces and lands only if the
 * stored head's version is still that head's sequence. The owner passes the head it replaces, so a
 * commit never reads the stored head back (decoding it cost more than the rest of the commit); one
 * process owns a data dir, and the owner's mailbox gives each instance one writer.
 *
 * With the write-ahead log (`commitLog: 'wal'`, the default), a commit of head and history only (no
 * message sent or received: the usual event, whether or not it changes pending timers) goes through
 * wal-commits.ts: acknowledged once its log frame is durable, seen by reads at once (timers and index
 * entries included), written to LMDB behind it with the entries its head derives. Its fencing check
 * counts commits not yet in LMDB. Every other write goes to LMDB as below, after the log's commits.
 *
 * LMDB writes are conditional blocks of lmdb-js's batched asynchronous transactions: the condition is
 * checked on LMDB's writer thread, so the write transaction never waits for this thread, and many
 * actors share one disk sync (group commit). The promise resolves only once the transaction is synced
 * to disk. Usage counters are not part of commits (one more page in every sync): the runtime adds
 * them in batches.
 */
const CAUGHT_UP: Promise<void> = Promise.resolve();
const NO_NEWER_HEADS: NewerHeads = { size: 0, head: () => undefined, heads: () => [] };

export class LmdbInstanceStore implements InstanceStore {
  private readonly heads: Database<InstanceHead, HeadKey>;
  private readonly transitions: Database<TransitionRecord, [string, string, string, number]>;
  private readonly usage: Database<UsageDelta, [string, string] | [string, string, string]>;
  /** The last totals kept of each counting run, by run, org, month and machine ('' for none): see addUsage. */
  private readonly usageRuns: Database<UsageDelta, [string, string, string, string]>;
  /** The latest month whose batch forgot older runs' totals (forgetOldRuns). */
  private usageRunsMonth = '';
  /** The `meta` database: the heads' format, the usage counts' log position. */
  private readonly meta: Database<number, string>;
  private readonly timers: DueTimers;
  private readonly outbox: Database<OutboxMessage, [number, number]>;
  private readonly inbox: Database<number, [string, string, string, string]>;
  private readonly indexes: IndexEntries;

  private readonly wal: WalCommits | undefined;
  /** Set when LMDB failed a commit, without the log (`commitLog: 'lmdb'`): every later write is refused. */
  private failed: Error | undefined;

  constructor(
    private readonly root: RootDatabase,
    options: InstanceStoreOptions,
  ) {
    this.heads = root.openDB({ name: 'instances', ...msgpackOrJson, useVersions: true });
    this.transitions = root.openDB({ name: 'transitions', ...msgpackOrJson });
    this.usage = root.openDB({ name: 'usage', encoding: 'msgpack' });
    this.usageRuns = root.openDB({ name: 'usageRuns', encoding: 'msgpack' });
    this.meta = root.openDB({ name: 'meta', encoding: 'msgpack' });
    this.timers = new DueTimers(root);
    this.outbox = root.openDB({ name: 'outbox', ...msgpackOrJson });
    this.inbox = root.openDB({ name: 'inbox', encoding: 'msgpack' });
    this.indexes = new IndexEntries(root);
    this.upgradeHeads();
    if ((options.commitLog ?? 'wal') === 'wal') {
      this.wal = new WalCommits(root, this.heads, this.transitions, [this.indexes, this.timers], {
        dir: options.walDir,
        segmentBytes: options.walSegmentBytes,
        syncFrames: options.walSyncFrames,
        applyDelayMs: options.walApplyDelayMs,
        onFailure: options.onStorageFailure,
        replayProgress: options.replayProgress,
      });
    } else {
      WalCommits.recover(root, this.heads, this.transitions, [this.indexes, this.timers], options.walDir, options.replayProgress);
      WriteAheadLog.remove(options.walDir);
    }
  }

  /** Resolves once every commit acknowledged so far is durable in the log (InstanceStoreOptions.walSyncFrames). */
  walSynced(): Promise<void> {
    return this.wal?.sync() ?? Promise.resolve();
  }

  caughtUp(): Promise<void> {
    return CAUGHT_UP;
  }

  getInstance(orgId: string, machine: string, name: string): InstanceHead | undefined {
    if (this.wal && this.wal.unapplied.size > 0) {
      const pending = this.wal.unapplied.head(instanceKey(orgId, machine, name));
      if (pending) return pending;
    }
    return this.heads.get([orgId, machine, name]);
  }

  /**
   * Every instance's key: LMDB's in key order, then those whose commits the write-ahead log holds and
   * LMDB does not have yet (a cluster node drops the partitions it gave up, and compares its instances
   * with the log's).
   */
  *instanceKeys(): Iterable<[orgId: string, machine: string, name: string]> {
    const pending = new Map<string, [string, string, string]>();
    if (this.wal)
      for (const head of this.wal.unapplied.heads())
        pending.set(instanceKey(head.orgId, head.machine, head.name), [head.orgId, head.machine, head.name]);
    for (const key of this.heads.getKeys()) {
      pending.delete(instanceKey(key[0], key[1], key[2]));
      yield key;
    }
    yield* pending.values();
  }

  listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): InstanceHead[] {
    const out: InstanceHead[] = [];
    for (const { key, value } of this.heads.getRange({ start: [orgId, machine, afterName ?? ''], end: [orgId, machine, AFTER_ALL] })) {
      if (key[2] === afterName) continue;
      out.push(value);
      if (out.length >= limit) break;
    }
    const pending = this.wal?.unapplied.headsOf(orgId, machine).filter((head) => afterName === undefined || head.name > afterName) ?? [];
    if (pending.length === 0) return out;
    // Names are slugs (ASCII): LMDB's key order is the string order.
    const byName = new Map(out.map((head) => [head.name, head]));
    for (const head of pending) byName.set(head.name, head);
    return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, limit);
  }

  /** Whether a machine has instances not yet in LMDB (the catalog's hasInstances reads LMDB only). */
  hasUnappliedInstances(orgId: string, machine: string): boolean {
    return this.wal !== undefined && this.wal.unapplied.size > 0 && this.wal.unapplied.headsOf(orgId, machine).length > 0;
  }

  /** Waits for every acknowledged commit to be in LMDB durably, then lets the log go. */
  async close(): Promise<void> {
    await this.wal?.close();
  }

  async createInstance(head: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<boolean> {
    this.checkHealthy();
    const key = instanceKey(head.orgId, head.machine, head.name);
    if (this.wal && this.headAndHistoryOnly(effects)) {
      const texts = commitTexts(head, history);
      if (texts !== undefined) return this.wal.write({ key, head, records: history, previous: undefined, texts });
    }
    if (this.wal?.exists(key, head)) return false;
    let failure: { error: unknown } | undefined;
    const created = await this.toLmdb(key, () =>
      this.heads.ifNoExists(keyOf(head), () => {
        failure = this.writeCommit(head, undefined, history, effects);
      }),
    );
    if (failure) throw failure.error;
    return created;
  }

  async commit(head: InstanceHead, previous: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<void> {
    this.checkHealthy();
    const key = instanceKey(head.orgId, head.machine, head.name);
    if (this.wal && this.headAndHistoryOnly(effects)) {
      const texts = commitTexts(head, history);
      if (texts !== undefined) {
        if (!(await this.wal.write({ key, head, records: history, previous, texts }))) throw this.conflict(previous);
        return;
      }
    }
    if (this.wal && !this.wal.isAt(key, head, previous.seq)) throw this.conflict(previous);
    let failure: { error: unknown } | undefined;
    const written = await this.toLmdb(key, () =>
      this.heads.ifVersion(keyOf(head), previous.seq, () => {
        failure = this.writeCommit(head, previous, history, effects);
      }),
    );
    if (failure) throw failure.error;
    if (!written) throw this.conflict(previous);
    this.wal?.forget(key);
  }

  /**
   * Whether a commit is of the head and history alone (no messages sent or received): those go
   * through the write-ahead log, whose frames hold nothing else (what a head derives, its index and
   * timer entries, is written from the head when the frame lands).
   */
  private headAndHistoryOnly(effects: CommitEffects): boolean {
    return !effects.outbox?.length && effects.receivedMessageId === undefined;
  }

  /**
   * Queues a write of a head to LMDB (`block`, a conditional block of lmdb-js): behind the log's
   * commits and fenced against them when there is a log (WalCommits.direct), as it is otherwise.
   */
  private toLmdb<R>(key: string, block: () => Promise<R>): Promise<R> {
    if (this.wal) return this.wal.direct(key, block);
    // Without the log, a commit LMDB failed (a full disk) refuses every later write until a restart: each
    // would fail the same way, and lmdb-js, failing commit after commit, ended in a corrupted heap.
    return block().catch((error: unknown) => {
      this.refuseWrites(error instanceof Error ? error : new Error(String(error)));
      throw this.failed;
    });
  }

  /** From now on every write is refused with 503 (storage failed: `why`), until the node restarts. */
  refuseWrites(why: Error): void {
    this.failed ??= unavailable(`storage failed (${why.message}): restart the node`);
  }

  writeRefusal(): Error | undefined {
    return this.failed ?? this.wal?.refusal();
  }

  /**
   * The writes of a commit, inside its conditional block (`previous` undefined for a create); if one
   * throws (a value that cannot be encoded), writes the previous values back in the same block.
   * lmdb-js commits what a block queued before the throw, so without this a failed commit could leave
   * a new head without its history record.
   */
  private writeCommit(
    head: InstanceHead,
    previous: InstanceHead | undefined,
    history: TransitionRecord[],
    effects: CommitEffects,
  ): { error: unknown } | undefined {
    try {
      this.putHead(head, previous);
      this.appendHistory(head, history);
      this.writeEffects(head, effects);
      return undefined;
    } catch (error) {
      if (previous) void this.heads.put(keyOf(previous), previous, previous.seq);
      else void this.heads.remove(keyOf(head));
      this.undoAppend(head, history, effects, previous);
      return { error };
    }
  }

  /**
   * Removes what a commit of `head` added besides the head itself, and indexes the timers of the head
   * it replaced again; each step alone, as any may throw again.
   */
  private undoAppend(head: InstanceHead, history: TransitionRecord[], effects: CommitEffects, previous?: InstanceHead): void {
    const attempt = (fn: () => void) => {
      try {
        fn();
      } catch {
        // this write was never queued: nothing to undo
      }
    };
    for (const record of history) attempt(() => void this.transitions.remove([head.orgId, head.machine, head.name, record.seq]));
    for (const message of effects.outbox ?? []) attempt(() => void this.outbox.remove(message.position));
    const received = effects.receivedMessageId;
    if (received !== undefined) attempt(() => void this.inbox.remove([head.orgId, head.machine, head.name, received]));
    attempt(() => this.timers.replace(head, previous));
    attempt(() => this.indexes.replace(head, previous));
  }

  hasReceived(orgId: string, machine: string, name: string, messageId: string): boolean {
    return this.inbox.get([orgId, machine, name, messageId]) !== undefined;
  }

  async markReceived(orgId: string, machine: string, name: string, messageId: string): Promise<void> {
    this.checkHealthy();
    await this.inbox.put([orgId, machine, name, messageId], Date.now());
  }

  listOutbox(limit: number): OutboxMessage[] {
    return [...this.outbox.getRange({ limit }).map(({ value }) => value)];
  }

  async removeOutbox(message: OutboxMessage): Promise<void> {
    this.checkHealthy();
    await this.outbox.remove(message.position);
  }

  async updateOutbox(message: OutboxMessage): Promise<void> {
    this.checkHealthy();
    await this.outbox.put(message.position, message);
  }

  async replaceHead(head: InstanceHead, previous: InstanceHead): Promise<void> {
    this.checkHealthy();
    const key = instanceKey(head.orgId, head.machine, head.name);
    if (this.wal && !this.wal.isAt(key, head, previous.seq)) throw this.conflict(previous);
    const written = await this.toLmdb(key, () => this.heads.ifVersion(keyOf(head), previous.seq, () => this.putHead(head, previous)));
    if (!written) throw this.conflict(previous);
    // (queued after the log's commits of the instance, so LMDB holds them too now)
    this.wal?.forget(key);
  }

  async deleteInstance(orgId: string, machine: string, name: string): Promise<boolean> {
    this.checkHealthy();
    const key = instanceKey(orgId, machine, name);
    const direct = this.wal?.beforeDirect(key);
    const deleted = await this.root
      .transaction(() => {
        if (direct && !direct.framesLanded()) return 'frames-missing' as const;
        const current = this.heads.get([orgId, machine, name]);
        if (current === undefined) return false;
        void this.heads.remove([orgId, machine, name]);
        this.timers.replace(current, undefined);
        this.indexes.replace(current, undefined);
        for (const key of this.transitions.getKeys({
          start: [orgId, machine, name, 0],
          end: [orgId, machine, name, Number.MAX_SAFE_INTEGER],
        })) {
          void this.transitions.remove(key);
        }
        for (const key of this.inbox.getKeys({ start: [orgId, machine, name, ''], end: [orgId, machine, name, AFTER_ALL] })) {
          void this.inbox.remove(key);
        }
        return true;
      })
      .finally(() => direct?.done());
    if (deleted === 'frames-missing') return (direct as NonNullable<typeof direct>).framesMissing();
    this.wal?.forget(key);
    return deleted;
  }

  listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): TransitionRecord[] {
    const out: TransitionRecord[] = [];
    for (const { value } of this.transitions.getRange({
      start: [orgId, machine, name, afterSeq + 1],
      end: [orgId, machine, name, Number.MAX_SAFE_INTEGER],
      limit,
    })) {
      out.push(value);
    }
    if (this.wal && this.wal.unapplied.size > 0 && out.length < limit) {
      // Records not yet in LMDB are newer than all it holds of the instance.
      out.push(...this.wal.unapplied.recordsAfter(instanceKey(orgId, machine, name), out.at(-1)?.seq ?? afterSeq, limit - out.length));
    }
    return out;
  }

  queryIndex(query: IndexQuery): IndexPosition[] {
    const pending = this.wal && this.wal.unapplied.size > 0 ? this.wal.unapplied.headsOf(query.orgId, query.machine) : [];
    const found = this.indexes.query(query, new Set(pending.map((head) => head.name)));
    if (pending.length === 0) return found;
    // LMDB's entries of these instances are older than their heads: theirs come from the heads.
    const { after, descending, filter } = query;
    for (const head of pending) {
      for (const value of valuesIn(head.indexValues, query.index) ?? []) {
        const position = { value, name: head.name };
        if (filter && !matchesIndexOp(value, filter.op, filter.value)) continue;
        if (after && (descending ? compareIndexPositions(position, after) >= 0 : compareIndexPositions(position, after) <= 0)) continue;
        found.push(position);
      }
    }
    found.sort((a, b) => (descending ? compareIndexPositions(b, a) : compareIndexPositions(a, b)));
    return found.slice(0, query.limit);
  }

  /** Pending timers and messages waiting in the outbox, counted in LMDB (GET /metrics, at a scrape). */
  backlog(): { timersPending: number; outboxDepth: number } {
    return { timersPending: this.timers.count(), outboxDepth: this.outbox.getCount() };
  }

  listDueTimers(uptoMs: number, limit: number): DueTimer[] {
    return this.timers.due(uptoMs, limit, this.wal?.unapplied ?? NO_NEWER_HEADS);
  }

  nextTimerDue(): number | undefined {
    return this.timers.first(this.wal?.unapplied ?? NO_NEWER_HEADS);
  }

  async removeDueTimers(entries: DueTimer[]): Promise<void> {
    this.checkHealthy();
    await this.root.transaction(() => this.timers.remove(entries));
  }

  async addUsage(
    orgId: string,
    usage: UsageDelta,
    machine?: string,
    atMs: number = Date.now(),
    position?: number,
    counted?: CountedSoFar,
  ): Promise<void> {
    this.checkHealthy();
    await this.root.transaction(() => {
      if (position !== undefined) {
        // (the position is kept in the same transaction as the counts: after a crash both or neither)
        if (position <= (this.meta.get(USAGE_POSITION_KEY) ?? 0)) return;
        void this.meta.put(USAGE_POSITION_KEY, position);
      }
      this.bumpUsage(orgId, counted ? this.beyondKept(orgId, machine, atMs, counted) : usage, machine, atMs);
    });
  }

  /** By how much a run's totals exceed the last ones kept of it (each field on its own); keeps the larger. */
  private beyondKept(orgId: string, machine: string | undefined, atMs: number, { run, totals }: CountedSoFar): UsageDelta {
    const month = usageMonth(atMs);
    if (month > this.usageRunsMonth) this.forgetOldRuns(month);
    const key: [string, string, string, string] = [run, orgId, month, machine ?? ''];
    const kept = this.usageRuns.get(key) ?? { transitions: 0, reads: 0 };
    const beyond = { transitions: Math.max(0, totals.transitions - kept.transitions), reads: Math.max(0, totals.reads - kept.reads) };
    if (beyond.transitions > 0 || beyond.reads > 0)
      void this.usageRuns.put(key, { transitions: kept.transitions + beyond.transitions, reads: kept.reads + beyond.reads });
    return beyond;
  }

  /**
   * Drops the runs' totals of months before the one before `month` (once a month, at its first batch:
   * a scan of them all), so they do not grow with every restart for ever. A batch of such a month no
   * longer comes: a node sends its counts within seconds.
   */
  private forgetOldRuns(month: string): void {
    this.usageRunsMonth = month;
    const [year, monthNo] = month.split('-').map(Number) as [number, number];
    const keepFrom = usageMonth(Date.UTC(year, monthNo - 2, 1));
    for (const key of this.usageRuns.getKeys({})) if (key[2] < keepFrom) void this.usageRuns.remove(key);
  }

  getUsage(orgId: string, month: string): UsageDelta {
    return this.usage.get([orgId, month]) ?? { transitions: 0, reads: 0 };
  }

  listUsage(orgId: string, months: number): UsageMonth[] {
    const found: UsageMonth[] = [];
    // Newest first: [orgId, month, machine] entries come before their [orgId, month] total in reverse order.
    for (const { key, value } of this.usage.getRange({ start: [orgId, '\uffff'], end: [orgId], reverse: true })) {
      const [, month, machine] = key as [string, string, string | undefined];
      let current = found.at(-1);
      if (current?.month !== month) {
        if (found.length === months) break;
        current = { month, transitions: 0, reads: 0, machines: [] };
        found.push(current);
      }
      if (machine === undefined) {
        current.transitions = value.transitions;
        current.reads = value.reads;
      } else current.machines.unshift({ machine, transitions: value.transitions, reads: value.reads });
    }
    return found;
  }

  private conflict(previous: InstanceHead): SequenceConflictError {
    const key = instanceKey(previous.orgId, previous.machine, previous.name);
    return new SequenceConflictError(
      previous.seq,
      this.wal ? this.wal.latestSeq(key, previous) : this.heads.getEntry(keyOf(previous))?.version,
    );
  }

  /**
   * After LMDB failed to take the log's frames nothing more is written (it could land before them),
   * nor once the store is closing. Writes to other tables than heads and histories need no ordering
   * with the log's commits: frames hold only heads and histories.
   */
  private checkHealthy(): void {
    if (this.failed) throw this.failed;
    this.wal?.checkWritable();
  }

  private putHead(head: InstanceHead, previous: InstanceHead | undefined): void {
    // The entry's version is the head's sequence: what the next commit's condition names.
    void this.heads.put(keyOf(head), head, head.seq);
    this.timers.replace(previous, head);
    this.indexes.replace(previous, head);
  }

  /**
   * Heads written before they carried versions (format 1) are rewritten once, with their sequence
   * as version; read through a handle that does not expect versions.
   */
  private upgradeHeads(): void {
    if (this.meta.get(HEADS_FORMAT_KEY) === HEADS_FORMAT) return;
    const legacy = this.root.openDB<InstanceHead, HeadKey>({ name: 'instances', encoding: 'msgpack' });
    this.root.transactionSync(() => {
      const heads = [...legacy.getRange({})];
      for (const { key, value } of heads) void this.heads.put(key, value, value.seq);
      void this.meta.put(HEADS_FORMAT_KEY, HEADS_FORMAT);
    });
  }

  private writeEffects(head: InstanceHead, effects: CommitEffects): void {
    for (const message of effects.outbox ?? []) void this.outbox.put(message.position, message);
    if (effects.receivedMessageId !== undefined)
      void this.inbox.put([head.orgId, head.machine, head.name, effects.receivedMessageId], Date.now());
  }

  private appendHistory(head: InstanceHead, history: TransitionRecord[]): void {
    for (const record of history) void this.transitions.put([head.orgId, head.machine, head.name, record.seq], record);
  }

  private bumpUsage(orgId: string, usage: UsageDelta, machine: string | undefined, atMs: number): void {
    if (usage.transitions === 0 && usage.reads === 0) return;
    const month = usageMonth(atMs);
    const keys: Array<[string, string] | [string, string, string]> =
      machine === undefined
        ? [[orgId, month]]
        : [
            [orgId, month],
            [orgId, month, machine],
          ];
    for (const key of keys) {
      const current = this.usage.get(key) ?? { transitions: 0, reads: 0 };
      void this.usage.put(key, { transitions: current.transitions + usage.transitions, reads: current.reads + usage.reads });
    }
  }
}
