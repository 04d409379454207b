import type { FollowedMessage } from './stream-follower.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { ServiceError, unavailable } from '../../domain/errors.js';
import type { IndexPosition } from '../../domain/index-values.js';
import {
  type CommitEffects,
  type DueTimer,
  type IndexQuery,
  type InstanceHead,
  type InstanceStore,
  type OutboxMessage,
  RequestMovedError,
  SequenceConflictError,
  type TransitionRecord,
  type UsageDelta,
  type UsageMonth,
} from '../instance-store.js';
import { withinMs } from '../../domain/within-ms.js';
import { DeliveredMessages } from './delivered-messages.js';
import { applyEntryEffects, type EntryEffectsHooks } from './entry-effects.js';
import {
  entryOf,
  entryText,
  instanceOf,
  keyOf,
  keyOfSubject,
  type LogEntry,
  type LogEntryBody,
  messageIdOf,
  withoutLogSeq,
} from './log-entries.js';
import { HeldPartitionReads, type LocalCopy } from './held-partition-reads.js';
import { LogPositions } from './log-positions.js';
import { entryCounts, MAX_MISSED_CHAIN, missedEntry } from './log-repairs.js';
import { CopyMending } from './copy-mending.js';
import { InstanceAudit } from './instance-audit.js';
import { FailedApplies } from './failed-applies.js';
import { droppedPartitions } from './partition-drops.js';
import type { PartitionCopy } from './partition-copy.js';
import { type AppliedMark, HeldPartitions } from './held-partitions.js';
import { type CountsHere, type JetStreamTransitionLog, LogFencedError } from './transition-log.js';

interface LogInstanceStoreOptions {
  /** Where usage counts go so that every node sums every node's (the META log); local when not given. */
  shareUsage?: (orgId: string, usage: UsageDelta, machine: string | undefined, atMs: number) => Promise<void>;
  /** This node's id, named by its fences. */
  nodeId?: string;
  /** Told of what the store mended (an entry its replica lacked, read from the log's leader). */
  note?: (message: string) => void;
}

/**
 * The instance store of a cluster node. JetStream's TX log is the truth: every write is appended to
 * the instance's subject, fenced by the stream sequence of its previous commit (the head's `logSeq`),
 * and acknowledged by the configured replicas before it resolves; then it is applied to this node's
 * LMDB store, which answers the owner's reads. A node holds only the partitions it owns
 * (design.md §6.2; `own`): for each, a follower applies the partition's entries (this node's own
 * appends, and any a previous owner still made), and a partition taken over is caught up from the
 * log before it is ready; one given up is dropped from the store. An owner that lost ownership cannot
 * write: its append is refused and surfaces as SequenceConflictError, which makes the runtime drop the
 * actor. So does an append the log stored after another entry that named the same position (a 2.9
 * server lets such races through): it counts on no copy (`apply`), and its writer is told
 * (transition-log.ts).
 */
export class LogInstanceStore implements InstanceStore {
  /** Local applies of one instance, one after another (the owner's own and the follower's may meet). */
  private readonly applying = new Map<string, Promise<unknown>>();
  /** The partitions this node owns, with their followers. */
  private readonly held: HeldPartitions;
  private timersApplied: ((earliestDueAt: number) => void) | undefined;
  private outboxApplied: (() => void) | undefined;
  /** Latest positions, headless instances' positions, entries that did not count, fences (log-positions.ts). */
  private readonly positions = new LogPositions();
  private stopped = false;
  /** Outbox entries this copy holds, and receivers' commits that name them (catch-ups replay both). */
  private readonly delivered: DeliveredMessages;
  /** What this node answers the others of the partitions it holds (lists, index queries), and what it holds. */
  readonly reads: HeldPartitionReads;
  private readonly nodeId: string;
  private readonly shareUsage: LogInstanceStoreOptions['shareUsage'];
  private readonly note: (message: string) => void;
  /** Mends an instance's copy to the log's leader when the replica it follows diverged (copy-mending.ts). */
  private readonly mending: CopyMending;
  /** Compares the instances held with the log's after a follower failed or NATS reconnected (instance-audit.ts). */
  private readonly audit: InstanceAudit;
  /** Followed entries that failed to apply: later ones of the same instance wait for them (failed-applies.ts). */
  private readonly failedApplies = new FailedApplies<PartitionCopy>();

  constructor(
    private readonly local: LocalCopy,
    private readonly log: JetStreamTransitionLog,
    private readonly onError: (message: string, error: unknown) => void,
    options: LogInstanceStoreOptions = {},
  ) {
    this.nodeId = options.nodeId ?? 'node';
    this.delivered = new DeliveredMessages(local, onError);
    this.held = new HeldPartitions({
      log,
      apply: (message) => this.applyFollowed(message),
      drop: (partitions) =>
        droppedPartitions(partitions, {
          local,
          positions: this.positions,
          delivered: this.delivered,
          inDropped: (orgId, machine, name) => partitions.has(this.partitionOf(orgId, machine, name)) && !this.holds(orgId, machine, name),
          inTurn: (key, work) => this.inTurn(key, work),
        }),
      // (a follower that failed may have been on a replica that diverges: its copy is compared with the log after)
      onError: (message, error) => (this.audit.wanted(), onError(message, error)),
    });
    this.reads = new HeldPartitionReads(local, {
      of: (orgId, machine, name) => this.partitionOf(orgId, machine, name),
      copy: (partition) => this.held.get(partition),
      beforeAnswer: (partitions) => this.audit.mendSuspectsIn(partitions),
    });
    this.shareUsage = options.shareUsage;
    this.note = options.note ?? (() => undefined);
    this.mending = new CopyMending({
      log,
      local,
      positions: this.positions,
      copyOf: (key) => this.held.get(this.partitionOf(key.orgId, key.machine, key.name)),
      inTurn: (key, work) => this.inTurn(key, work),
      apply: (entry, seq) => this.apply(entry, seq, false),
      applyFromLeader: (entry, seq) => this.apply(entry, seq, false, 0, true),
      positionOf: (key) => this.positionOf(key),
      knowsEveryEntry: (key) => this.knowsEveryEntry(key),
      replacedInstance: (key) => this.failedApplies.over(key),
      note: this.note,
      onError,
    });
    this.audit = new InstanceAudit({
      log,
      mending: this.mending,
      readyPartitions: () => this.held.list().flatMap(({ partition, ready }) => (ready ? [partition] : [])),
      localInstances: () => local.instanceKeys(),
      partitionOf: (orgId, machine, name) => this.partitionOf(orgId, machine, name),
      rebuilt: (key) => this.mending.rebuiltFromLeader(key),
      note: this.note,
      onError,
    });
  }

  /** Appends through the log, telling the audit of one that failed without a refusal (instance-audit.ts). */
  private appended = (...args: Parameters<JetStreamTransitionLog['append']>) =>
    this.log.append(...args).catch((error: unknown) => {
      if (!(error instanceof LogFencedError || (error instanceof ServiceError && error.status === 413)))
        this.audit.suspect({ orgId: args[0], machine: args[1], name: args[2] });
      throw error;
    });

  /** Compares the instances held here with the log's soon (instance-audit.ts): after NATS reconnected, say. */
  auditSoon = (): void => this.audit.wanted();

  auditInstances = (): Promise<number> => this.audit.audit(); // (the same, now; how many instances it mended)

  /** The partition of an instance, as the log divides them. */
  partitionOf(orgId: string, machine: string, name: string): number {
    return this.log.partitionOf(orgId, machine, name);
  }

  /** How many partitions the log divides instances into. */
  get partitionCount(): number {
    return this.log.partitions;
  }

  /** By partition this node owns: the stream sequence up to which its entries are applied here (for a restart to resume from). */
  appliedPositions(): Record<number, number> {
    return this.held.appliedPositions();
  }

  /** By partition this node owns: its applied position now, and the copy that says so (HeldPartitions.appliedMarks). */
  appliedMarks(): AppliedMark[] {
    return this.held.appliedMarks();
  }

  stillHolds(mark: AppliedMark): boolean {
    return this.held.stillHolds(mark);
  }

  /** The partitions this node owns, and whether each is caught up. */
  partitions(): Array<{ partition: number; ready: boolean; appliedSeq: number }> {
    return this.held.list();
  }

  catchUpProgress(): { ready: number; held: number; done: number; total: number } {
    return this.held.catchUpProgress();
  }

  /**
   * Told the earliest due time of every head a follower applies with pending timers. This node's timer
   * scheduler hears of its own commits' timers from the runtime; a head written by another node (in a
   * partition this node took over) reaches it only here, and without this the scheduler would find it
   * only on its next routine look, up to 5 s late.
   */
  onTimersApplied(listener: (earliestDueAt: number) => void): void {
    this.timersApplied = listener;
  }

  /**
   * Told when an applied entry put messages in this copy's outbox. This node's dispatcher hears of its
   * own commits from the runtime; a commit another node wrote (in a partition this node took over or
   * took back) reaches the outbox only here, and without this the dispatcher would not look again
   * until something else woke it: never, once the cluster is quiet.
   */
  onOutboxApplied(listener: () => void): void {
    this.outboxApplied = listener;
  }

  /** What an applied entry tells this node's timer scheduler and dispatcher, and the fences it notes. */
  private readonly hooks: EntryEffectsHooks = {
    timers: (head) => {
      if (head.pendingTimers.length > 0) this.timersApplied?.(Math.min(...head.pendingTimers.map((timer) => timer.dueAt)));
    },
    outbox: (effects) => {
      if (effects.outbox?.length) this.outboxApplied?.();
    },
    fence: (requestId, by) => this.positions.noteFence(requestId, by),
  };

  /** Makes `partitions` the ones this node holds (HeldPartitions.hold). */
  own(nc: NatsConnection, partitions: ReadonlySet<number>, from: (partition: number) => number): void {
    this.stopped = false;
    this.audit.resume();
    this.held.hold(nc, partitions, from);
  }

  /** Whether this node owns the instance's partition (in the view it was last given). */
  holds(orgId: string, machine: string, name: string): boolean {
    return this.held.has(this.partitionOf(orgId, machine, name));
  }

  /**
   * Resolves once the instance's partition is caught up here; RequestMovedError when this node does not
   * hold it (its owner is asked instead), a 503 when it is not caught up within `ms`.
   */
  async partitionReady(orgId: string, machine: string, name: string, ms = READY_WAIT_MS): Promise<void> {
    const copy = this.held.get(this.partitionOf(orgId, machine, name));
    // (nothing ran here: whoever asked asks the instance's owner in its view again)
    if (!copy) throw new RequestMovedError(`this node does not hold instance ${name} of machine ${machine} now`);
    if (copy.ready) return;
    await withinMs(copy.whenReady(), ms, () =>
      unavailable(`this node is still catching up the partition of instance ${name} of machine ${machine} with the cluster's log; retry`),
    );
  }

  /** Resolves once every partition this node owns is caught up (within `ms`, else a 503): before it answers for all it holds. */
  allReady(ms = READY_WAIT_MS): Promise<void> {
    return this.held.allReady(ms);
  }

  async stopFollowing(): Promise<void> {
    this.stopped = true;
    this.audit.stop();
    await this.held.stop();
  }

  /** One entry a partition's follower received. */
  private applyFollowed(message: FollowedMessage): Promise<void> {
    // This node's own appends come back through the follower: known applied by the subject alone (its
    // last three tokens name the instance), they are passed by without decoding the entry.
    const key = keyOfSubject(message.subject);
    const latest = this.positions.latestOf(key);
    if (latest !== undefined && latest >= message.seq) {
      this.failedApplies.passed(key, message.seq);
      return Promise.resolve();
    }
    const entry = entryOf(message);
    const { orgId, machine, name } = instanceOf(entry);
    const copy = this.held.get(this.partitionOf(orgId, machine, name));
    return this.inTurn(key, async () => {
      const failed = this.failedApplies.waitsFor(key, message.seq, entry.after, copy);
      if (failed !== undefined) throw new Error(`entry ${failed} of instance ${key} did not apply, and this later one waits for it`);
      await this.apply(entry, message.seq, false).catch((error: unknown) => {
        this.failedApplies.note(key, message.seq, entry.after, copy);
        throw error;
      });
      this.positions.noteLatest(key, message.seq);
    });
  }

  getInstance(orgId: string, machine: string, name: string): InstanceHead | undefined {
    return this.local.getInstance(orgId, machine, name);
  }

  /** The instances of partitions this node holds (rows of one given up and not dropped yet are passed by). */
  listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): InstanceHead[] {
    return this.reads.listIn((partition) => this.held.has(partition), orgId, machine, afterName, limit);
  }

  async createInstance(head: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<boolean> {
    let expected = 0;
    for (let attempt = 0; attempt < 3; attempt++) {
      this.checkNotTakenOver(head, history, effects);
      try {
        const entry: LogEntry = { kind: 'create', head: withoutLogSeq(head), history, effects, after: expected };
        const payload = entryText(entry);
        const { seq } = await this.appended(
          head.orgId,
          head.machine,
          head.name,
          expected,
          payload,
          messageIdOf(head, payload, expected),
          this.countsHere(head),
        );
        head.logSeq = seq;
        await this.applyOwn(entry, seq);
        return true;
      } catch (error) {
        if (!(error instanceof LogFencedError)) throw error;
        // The subject has entries: the instance exists, unless its copy here, caught up, says otherwise
        // (the last one deleted it, or fenced a create retried on another node: see fence).
        const last = await this.caughtUpStrictly(head);
        if (this.local.getInstance(head.orgId, head.machine, head.name)) return false;
        expected = last;
      }
    }
    return false;
  }

  async commit(head: InstanceHead, previous: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<void> {
    this.checkNotTakenOver(head, history, effects);
    const { entry, seq } = await this.append(previous, {
      kind: 'commit',
      head: withoutLogSeq(head),
      previousSeq: previous.seq,
      history,
      effects,
    });
    head.logSeq = seq;
    await this.applyOwn(entry, seq);
  }

  async replaceHead(head: InstanceHead, previous: InstanceHead): Promise<void> {
    const { entry, seq } = await this.append(previous, { kind: 'head', head: withoutLogSeq(head) });
    head.logSeq = seq;
    await this.applyOwn(entry, seq);
  }

  async markReceived(orgId: string, machine: string, name: string, messageId: string): Promise<void> {
    const current = this.local.getInstance(orgId, machine, name);
    if (!current) return;
    this.checkNotTakenOver(current, [], { receivedMessageId: messageId });
    const { entry, seq } = await this.append(current, { kind: 'received', orgId, machine, name, messageId });
    await this.applyOwn(entry, seq);
  }

  async deleteInstance(orgId: string, machine: string, name: string): Promise<boolean> {
    const current = this.local.getInstance(orgId, machine, name);
    if (!current) return false;
    const { entry, seq } = await this.append(current, { kind: 'delete', orgId, machine, name });
    await this.applyOwn(entry, seq);
    return true;
  }

  hasReceived(orgId: string, machine: string, name: string, messageId: string): boolean {
    return this.local.hasReceived(orgId, machine, name, messageId);
  }

  listOutbox(limit: number): OutboxMessage[] {
    return this.local.listOutbox(limit);
  }

  removeOutbox(message: OutboxMessage): Promise<void> {
    this.delivered.forget(message.id);
    return this.local.removeOutbox(message);
  }

  updateOutbox(message: OutboxMessage): Promise<void> {
    return this.local.updateOutbox(message);
  }

  listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): TransitionRecord[] {
    return this.local.listTransitions(orgId, machine, name, afterSeq, limit);
  }

  /** This node's part of an index: the entries of the partitions it holds, with their heads. */
  queryIndex(query: IndexQuery): IndexPosition[] {
    return this.reads.queryIn((partition) => this.held.has(partition), query);
  }

  listDueTimers(uptoMs: number, limit: number): DueTimer[] {
    return this.local.listDueTimers(uptoMs, limit);
  }

  nextTimerDue(): number | undefined {
    return this.local.nextTimerDue();
  }

  removeDueTimers(entries: DueTimer[]): Promise<void> {
    return this.local.removeDueTimers(entries);
  }

  /** Whether no entry of the instance newer than `head` was applied here (by this node as owner, or followed from another). */
  isCurrent(head: InstanceHead): boolean {
    const key = keyOf(head);
    // (a head held in memory past the position an instance was rebuilt to is the entry the log never committed)
    const rebuiltTo = this.positions.rebuiltTo(key);
    if (rebuiltTo !== undefined && (head.logSeq ?? 0) > rebuiltTo) return false;
    let latest = this.positions.latestOf(key);
    if (latest === undefined) {
      latest = this.local.getInstance(head.orgId, head.machine, head.name)?.logSeq ?? 0;
      this.positions.noteLatest(key, latest);
    }
    return (head.logSeq ?? 0) >= latest;
  }

  /**
   * Resolves once this node's copy holds every commit of the instance the log has now; unlike the read
   * barrier (caughtUp) it fails, with a 503, when the log cannot be asked or the copy does not get
   * there in time. An owner calls it before it serves an instance it may not have served throughout
   * (a change of members, a reconnect, a pause of its own): what it decides then, a 4xx included, is
   * decided on the latest state.
   */
  async ensureCurrent(orgId: string, machine: string, name: string): Promise<void> {
    await this.caughtUpStrictly({ orgId, machine, name });
  }

  /**
   * Before a request is run again on this node after the node first asked for it did not answer (it may
   * have applied it, or may still), its id is fenced in the instance's log: an append after the log's
   * current last entry, which every append still under way elsewhere was made before (so it is refused
   * by JetStream's expected-sequence check), and after which no node but this one commits that request
   * (checkNotTakenOver). Once it resolves, this node's copy holds everything before the fence, so the
   * look for the request in the history (a retry is answered from it) is not made on a stale copy.
   */
  async fence(orgId: string, machine: string, name: string, requestId: string): Promise<void> {
    const key = { orgId, machine, name };
    for (let attempt = 0; attempt < 3; attempt++) {
      const last = await this.caughtUpStrictly(key);
      try {
        const entry: LogEntry = { kind: 'fence', orgId, machine, name, requestId, by: this.nodeId, after: last };
        const payload = entryText(entry);
        const { seq } = await this.appended(orgId, machine, name, last, payload, messageIdOf(key, payload, last), this.countsHere(key));
        await this.applyOwn(entry, seq);
        return;
      } catch (error) {
        if (!(error instanceof LogFencedError)) throw error;
        // (another write landed meanwhile: catch up with it and fence after it)
      }
    }
    throw unavailable(`instance ${name} of machine ${machine} is being written by another node; retry`);
  }

  /** Whether a request was fenced (by any node, this one included) lately: one of its copies was asked again. */
  wasFenced(requestId: string): boolean {
    return this.positions.fencedBy(requestId) !== undefined;
  }

  addUsage(orgId: string, usage: UsageDelta, machine?: string, atMs: number = Date.now()): Promise<void> {
    return this.shareUsage ? this.shareUsage(orgId, usage, machine, atMs) : this.local.addUsage(orgId, usage, machine, atMs);
  }

  getUsage(orgId: string, month: string): UsageDelta {
    return this.local.getUsage(orgId, month);
  }

  listUsage(orgId: string, months: number): UsageMonth[] {
    return this.local.listUsage(orgId, months);
  }

  /** Appends after `previous`'s log position; a refused append (or one that does not count) is the runtime's conflict. */
  private async append(previous: InstanceHead, body: LogEntryBody): Promise<{ entry: LogEntry; seq: number }> {
    // (the copy of an instance whose append failed without a refusal is rebuilt first, and the request run again: instance-audit.ts)
    if (await this.audit.rebuiltIfSuspect(previous)) throw new SequenceConflictError(previous.seq, undefined);
    const after = previous.logSeq ?? 0;
    const entry: LogEntry = { ...body, after };
    const payload = entryText(entry);
    try {
      return {
        entry,
        seq: (
          await this.appended(
            previous.orgId,
            previous.machine,
            previous.name,
            after,
            payload,
            messageIdOf(previous, payload, after),
            this.countsHere(previous),
          )
        ).seq,
      };
    } catch (error) {
      if (!(error instanceof LogFencedError)) throw error;
      // Another node wrote the instance: let this node's copy catch up first, so that the runtime,
      // which drops its head and may run the request again, reloads the latest one (and a 503 when it
      // cannot: a run again on a stale copy would decide on a state that is not the instance's).
      // (mended to the log there when its replica diverged: the next run appends after the log's last)
      await this.caughtUpStrictly(previous);
      throw new SequenceConflictError(previous.seq, undefined);
    }
  }

  /**
   * The read barrier, for an instance this node holds: its partition caught up, then its last logged
   * entry applied here (CATCH_UP_MS at most); for a whole org, every partition this node holds caught
   * up. An instance held elsewhere is its owner's to answer (no wait here). With NATS out of reach it
   * answers from the local copy rather than not at all.
   */
  async caughtUp(orgId: string, machine?: string, name?: string): Promise<void> {
    if (machine === undefined || name === undefined) {
      await this.allReady().catch(() => undefined);
      return;
    }
    const copy = this.held.get(this.partitionOf(orgId, machine, name));
    if (!copy) return;
    await withinMs(copy.whenReady(), CATCH_UP_MS, () => undefined).catch(() => undefined);
    const last = await this.log.lastSeq(orgId, machine, name).catch(() => undefined);
    if (last === undefined) return;
    await copy.appliedTo(last, CATCH_UP_MS);
    await this.mending.mendedToLog({ orgId, machine, name }, last);
  }

  /**
   * Waits (up to CATCH_UP_MS) until the local copy holds the instance's last logged entry, whose
   * position it returns; a 503 when the log cannot be asked, the instance's partition is not held here,
   * or the copy is not there in time.
   */
  private async caughtUpStrictly(key: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): Promise<number> {
    await this.partitionReady(key.orgId, key.machine, key.name);
    const copy = this.held.get(this.partitionOf(key.orgId, key.machine, key.name));
    if (!copy) throw new RequestMovedError(`this node does not hold instance ${key.name} of machine ${key.machine} now`);
    let last: number;
    try {
      last = await this.log.lastSeq(key.orgId, key.machine, key.name);
    } catch (error) {
      throw unavailable(`the cluster's log cannot be read now (${error instanceof Error ? error.message : String(error)}); retry`);
    }
    await copy.appliedTo(last, CATCH_UP_MS);
    if (copy.appliedSeq < last)
      throw unavailable(`this node's copy of instance ${key.name} of machine ${key.machine} is behind the cluster's log; retry`);
    await this.mending.mendedToLog(key, last);
    return last;
  }

  /**
   * Refuses a commit of a request (a history record's request id, or the message it applies) that
   * another node fenced (see fence): that node runs it now, and this one must not apply it too.
   */
  private checkNotTakenOver(head: Pick<InstanceHead, 'name' | 'machine'>, history: TransitionRecord[], effects: CommitEffects): void {
    if (!this.positions.anyFenced) return;
    const ids = history.map((record) => record.requestId).filter((id): id is string => id !== undefined);
    if (effects.receivedMessageId !== undefined) ids.push(effects.receivedMessageId);
    for (const id of ids) {
      const by = this.positions.fencedBy(id);
      if (by !== undefined && by !== this.nodeId)
        throw new RequestMovedError(`request ${id} to instance ${head.name} of machine ${head.machine} was taken over by node ${by}`);
    }
  }

  /**
   * This node's own append, which counts (the log said so): applied to the local store now, unless the
   * copy is not where the append was made from (it lags the head the owner held); then the partition's
   * follower applies it in its turn, waited for here (CATCH_UP_MS at most).
   */
  private async applyOwn(entry: LogEntry, seq: number): Promise<void> {
    const { orgId, machine, name } = instanceOf(entry);
    const copy = this.held.get(this.partitionOf(orgId, machine, name));
    // (a write of a request that was under way when this node gave the partition up: it is in the log,
    // and its partition's owner applies it; this node holds none of the partition)
    if (!copy) return;
    if (!(await this.applyLocally(entry, seq, true))) await copy.appliedTo(seq, CATCH_UP_MS);
  }

  /**
   * Applies one log entry to the local store unless it already holds it (the owner applies its own
   * right after appending, and meets it again when following). One at a time per instance. Resolves
   * false for an own entry left to the follower (see applyOwn).
   */
  private applyLocally(entry: LogEntry, seq: number, own = false): Promise<boolean> {
    const key = keyOf(instanceOf(entry));
    return this.inTurn(key, async () => {
      const applied = await this.apply(entry, seq, own);
      // (not an own entry left to the follower: the copy's position is not there, and the follower, which
      // passes by what it is told is applied, must apply it)
      if (applied) this.positions.noteLatest(key, seq);
      return applied;
    });
  }

  /** Runs `work` on one instance's rows after whatever runs on them already (applies, a partition's drop). */
  private inTurn<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.applying.get(key) ?? Promise.resolve();
    const run = before.then(work);
    const tail = run.catch(() => undefined);
    this.applying.set(key, tail);
    void tail.then(() => {
      if (this.applying.get(key) === tail) this.applying.delete(key);
    });
    return run;
  }

  /**
   * Applies one entry at stream sequence `seq`, in its instance's turn. An entry the copy holds already
   * (its position is there or past it: this node's own write, a replay after a restart) is passed by.
   * An entry that does not count, because another entry of its instance came between the one it names
   * and it, only moves the instance's log position (the next append must name it for JetStream to take
   * it). `own`: this node's append, known to count; false is resolved when it is left to the follower.
   */
  private async apply(entry: LogEntry, seq: number, own: boolean, missedDepth = 0, fromLeader = false): Promise<boolean> {
    const { orgId, machine, name } = instanceOf(entry);
    const key = keyOf({ orgId, machine, name });
    let current = this.local.getInstance(orgId, machine, name);
    let position = current ? (current.logSeq ?? 0) : this.positions.headlessAt(key);
    if (position !== undefined && position >= seq) return true;
    // (an entry naming a position at or past its own: the replica numbers entries otherwise than the log
    // (2.9.10, diverged), and the entries it names may be missing from it: the instance is taken from the leader)
    if (!own && !fromLeader && entry.after !== undefined && entry.after >= seq)
      return this.mending.rebuildInTurn({ orgId, machine, name }, await this.log.lastSeq(orgId, machine, name), position ?? 0);
    if (!own && (await this.appliedMissed(entry, key, position, seq, missedDepth))) {
      current = this.local.getInstance(orgId, machine, name);
      position = current ? (current.logSeq ?? 0) : this.positions.headlessAt(key);
    }
    if (own) {
      if (position !== undefined && position !== entry.after) return false;
    } else if (!(await this.counts(entry, seq, position))) {
      // (an entry the log's leader counts, which this copy does not: the copy holds an entry of the
      // instance between that the leader does not have there; it is rebuilt from the leader, this one
      // included: copy-mending.ts)
      if (
        !fromLeader &&
        position !== undefined &&
        (await this.mending.countsOnLog(entry, seq)) &&
        (await this.mending.rebuildInTurn({ orgId, machine, name }, seq, position))
      )
        return true;
      // (past the log's last entry of the instance: this entry again at another sequence, from a replica
      // that numbers entries otherwise; the position the next append names stays the log's)
      if (!fromLeader && (await this.log.lastSeq(orgId, machine, name)) < seq) return true;
      this.positions.noteUncounted(seq);
      if (current) await this.local.replaceHead({ ...current, logSeq: seq }, current);
      else this.positions.noteHeadless(key, seq);
      return true;
    }
    const after = await applyEntryEffects(this.local, this.delivered, this.hooks, entry, seq, current);
    // (with no head here now, the instance's position is kept beside the heads)
    if (after === 'headed') this.positions.headed(key);
    else this.positions.noteHeadless(key, seq);
    return true;
  }

  /** Whether the copy lacked the entry this one names, and has applied it now, read from the stream's leader (log-repairs.ts). */
  private async appliedMissed(entry: LogEntry, key: string, position: number | undefined, seq: number, depth: number): Promise<boolean> {
    if (depth >= MAX_MISSED_CHAIN) return false;
    const missed = await missedEntry(this.log, entry, seq, position, () => this.knowsEveryEntry(instanceOf(entry)));
    if (!missed) return false;
    const named = entry.after as number;
    this.note(
      `entry ${named} of instance ${key} was missing from this copy's replica of the log (entry ${seq} names it); read from the log's leader`,
    );
    await this.apply(missed, named, false, depth + 1);
    this.positions.noteLatest(key, named);
    return true;
  }

  /** Whether an entry counts (log-repairs.ts, entryCounts). */
  private counts(entry: LogEntry, seq: number, position: number | undefined): Promise<boolean> {
    return entryCounts(this.log, entry, seq, position, {
      knowsEveryEntry: () => this.knowsEveryEntry(instanceOf(entry)),
      stopped: () => this.stopped,
      onError: this.onError,
    });
  }

  /** The log position of the instance's latest entry in this copy: its head's, or a headless instance's (undefined: none known). */
  private positionOf(key: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): number | undefined {
    const current = this.local.getInstance(key.orgId, key.machine, key.name);
    return current ? (current.logSeq ?? 0) : this.positions.headlessAt(keyOf(key));
  }

  /** Whether the copy holds every entry of the instance it has had (its partition followed from the start, no position forgotten). */
  private knowsEveryEntry({ orgId, machine, name }: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): boolean {
    return !!this.held.get(this.partitionOf(orgId, machine, name))?.followedFromStart && !this.positions.headlessForgotten;
  }

  /**
   * Whether this node's append at `seq` counts, as its copy of the partition tells once its follower
   * applied every entry up to it (an entry that counts is applied; one that does not is noted in
   * `uncounted`): what every reader of the log goes by, told without asking the log (transition-log.ts).
   */
  private countsHere(key: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): CountsHere {
    return async (seq) => {
      const copy = this.held.get(this.partitionOf(key.orgId, key.machine, key.name));
      if (!copy) return undefined;
      await copy.ownEntryApplied(seq, CATCH_UP_MS);
      if (copy.appliedSeq < seq) return undefined;
      if (this.positions.isUncounted(seq)) return false;
      const position = this.positionOf(key);
      return position !== undefined && position >= seq ? true : undefined;
    };
  }
}

/** How long a request for an instance waits for its partition to be caught up on a node that just took it. */
const READY_WAIT_MS = 10_000;

/** How long a fenced writer waits for its copy to catch up with the log before giving up the request. */
const CATCH_UP_MS = 2_000;
