import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { createHash } from 'node:crypto';
import { unavailable } from '../../domain/errors.js';
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
import { StreamFollower } from './stream-follower.js';
import { type JetStreamTransitionLog, LogFencedError } from './transition-log.js';

/**
 * One entry of an instance as the TX log holds it, and the stream sequence of the instance's entry it
 * follows (`after`: what its append named as JetStream's expected last subject sequence; 0 for the
 * first). `head.logSeq` is left out: it is the message's own sequence. An entry counts only when it is
 * the first of its instance after `after` (see transition-log.ts: a 2.9 server can store appends it
 * should have refused); one that does not changes nothing but the instance's log position, on every copy.
 * Entries written before 2026-11-28 carry no `after`: their message's header says it.
 */
type LogEntry = LogEntryBody & { after?: number };

type LogEntryBody =
  | { kind: 'create'; head: InstanceHead; history: TransitionRecord[]; effects: CommitEffects }
  | { kind: 'commit'; head: InstanceHead; previousSeq: number; history: TransitionRecord[]; effects: CommitEffects }
  /** A head-only change (status, timer retries) at the same head sequence. */
  | { kind: 'head'; head: InstanceHead }
  | { kind: 'received'; orgId: string; machine: string; name: string; messageId: string }
  | { kind: 'delete'; orgId: string; machine: string; name: string }
  /**
   * Nothing changes but the instance's log position: written by a node that is asked a request again
   * (its id: a request id, or a message id) after the node first asked did not answer, before it looks
   * for it. An append of the first node that is still under way is fenced by it, and no node but `by`
   * commits that request after it (see fence).
   */
  | { kind: 'fence'; orgId: string; machine: string; name: string; requestId: string; by: string };

interface LogInstanceStoreOptions {
  /** Where usage counts go so that every node sums every node's (the META log); local when not given. */
  shareUsage?: (orgId: string, usage: UsageDelta, machine: string | undefined, atMs: number) => Promise<void>;
  /** This node's id, named by its fences. */
  nodeId?: string;
}

/**
 * The instance store of a cluster node. JetStream's TX log is the truth: every write is appended to
 * the instance's subject, fenced by the stream sequence of its previous commit (the head's `logSeq`),
 * and acknowledged by the configured replicas before it resolves; then it is applied to this node's
 * LMDB store, which answers every read. Every node also follows the log (`follow`) and applies the
 * commits other owners make, so each node's LMDB holds every instance within milliseconds: lists,
 * history pages, due timers and outboxes are read locally, and a new owner finds an instance's head
 * there. An owner that lost ownership cannot write: its append is refused and surfaces as
 * SequenceConflictError, which makes the runtime drop the actor. So does an append the log stored
 * after another entry that named the same position (a 2.9 server lets such races through): it counts
 * on no copy (`apply`), and its writer is told (transition-log.ts).
 */
export class LogInstanceStore implements InstanceStore {
  /** Local applies of one instance, one after another (the owner's own and the follower's may meet). */
  private readonly applying = new Map<string, Promise<unknown>>();
  private following: StreamFollower | undefined;
  /** The next stream sequence the follower asks for: every one before it was received. */
  private received = 1;
  /** Received entries whose local apply has not finished yet (applies of different instances overlap). */
  private readonly pending = new Map<number, Promise<void>>();
  /** Resolves waiters once the watermark passes their sequence. */
  private watermarkWaiters: Array<{ seq: number; resolve: () => void }> = [];
  private timersApplied: ((earliestDueAt: number) => void) | undefined;
  /**
   * The log position of the latest entry applied here, by instance, for the LATEST_KEPT instances
   * written last (since this process started): an owner's head held in memory that is older is stale
   * (isCurrent; the others are looked up in the copy).
   */
  private readonly latest = new Map<string, number>();
  /** Requests taken over by a fence, and the node that fenced them (see fence); the latest FENCES_KEPT. */
  private readonly fenced = new Map<string, string>();
  /**
   * The log position of instances that have entries but no head in this copy (deleted; or written only
   * by entries that need a head, such as a fence of a create retried before the instance existed),
   * since this process started; heads hold their own (`logSeq`). Bounded: past HEADLESS_KEPT the one
   * written longest ago goes, and `headlessForgotten` says so.
   */
  private readonly headless = new Map<string, number>();
  private headlessForgotten = false;
  /** Whether the follower started at the stream's first entry, so an instance it has no position of has no entry before. */
  private followedFromStart = false;
  private stopped = false;
  /** Where each outbox entry of this copy is, by message id (found without scanning the outbox). */
  private outboxPositions: Map<string, [number, number]> | undefined;
  /** Delivered messages whose sender's commit may not be applied yet: dropped once the watermark reaches `before`. */
  private deliveredLater: Array<{ before: number; messageId: string }> = [];
  private readonly nodeId: string;
  private readonly shareUsage: LogInstanceStoreOptions['shareUsage'];

  constructor(
    private readonly local: InstanceStore,
    private readonly log: JetStreamTransitionLog,
    private readonly onError: (message: string, error: unknown) => void,
    options: LogInstanceStoreOptions = {},
  ) {
    this.nodeId = options.nodeId ?? 'node';
    this.shareUsage = options.shareUsage;
  }

  /**
   * The watermark: every TX stream entry up to it is applied to this node's copy. Only the follower
   * moves it (an owner's own writes are applied ahead of it, out of stream order, and do not count).
   */
  get appliedSeq(): number {
    let lowest = this.received;
    for (const seq of this.pending.keys()) if (seq < lowest) lowest = seq;
    return lowest - 1;
  }

  /** Resolves once the watermark reaches `seq` (or after `ms`). */
  private async watermarkAt(seq: number, ms: number): Promise<void> {
    if (this.appliedSeq >= seq) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.watermarkWaiters.push({ seq, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  private watermarkMoved(): void {
    if (this.deliveredLater.length > 0) this.dropDeliveredNow();
    if (this.watermarkWaiters.length === 0) return;
    const at = this.appliedSeq;
    const still: typeof this.watermarkWaiters = [];
    for (const waiter of this.watermarkWaiters) waiter.seq <= at ? waiter.resolve() : still.push(waiter);
    this.watermarkWaiters = still;
  }

  /**
   * Told the earliest due time of every head the follower applies with pending timers. This node's
   * timer scheduler hears of its own commits' timers from the runtime; a head written by another node
   * (one this node owns now, after a failover or a restart of the whole cluster) reaches it only here,
   * and without this the scheduler would find it only on its next routine look, up to 5 s late.
   */
  onTimersApplied(listener: (earliestDueAt: number) => void): void {
    this.timersApplied = listener;
  }

  private noteTimers(head: InstanceHead): void {
    if (head.pendingTimers.length > 0) this.timersApplied?.(Math.min(...head.pendingTimers.map((timer) => timer.dueAt)));
  }

  /**
   * Follows the TX log from `from` (the first stream sequence not applied here) and applies every
   * commit to the local store, in stream order.
   */
  async follow(nc: NatsConnection, from: number): Promise<void> {
    this.received = Math.max(this.received, from);
    this.followedFromStart = this.received <= 1;
    this.stopped = false;
    this.following = new StreamFollower({
      js: jetstream(nc),
      stream: this.log.stream,
      next: () => this.received,
      // Not awaited: entries of different instances apply side by side (their commits then share an
      // LMDB sync); one instance's apply one after another (applyLocally).
      handle: async (message) => {
        const seq = message.seq;
        this.received = seq + 1;
        const entry = message.json<LogEntry>();
        entry.after ??= positionOf(message.headers?.get(EXPECTED_HEADER));
        const applied = this.applyLocally(entry, seq)
          .then(
            () => undefined,
            (error: unknown) => this.onError(`could not apply TX log entry ${seq} to the local store`, error),
          )
          .finally(() => {
            this.pending.delete(seq);
            this.watermarkMoved();
          });
        this.pending.set(seq, applied);
        // Bounded: past MAX_PENDING applies in flight, the follower waits for one to finish.
        if (this.pending.size >= MAX_PENDING) await Promise.race(this.pending.values());
      },
      onError: this.onError,
    });
    await this.following.start();
  }

  async stopFollowing(): Promise<void> {
    this.stopped = true;
    await this.following?.stop();
    this.following = undefined;
  }

  getInstance(orgId: string, machine: string, name: string): InstanceHead | undefined {
    return this.local.getInstance(orgId, machine, name);
  }

  listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): InstanceHead[] {
    return this.local.listInstances(orgId, machine, afterName, limit);
  }

  async createInstance(head: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<boolean> {
    let expected = 0;
    for (let attempt = 0; attempt < 3; attempt++) {
      this.checkNotTakenOver(head, history, effects);
      try {
        const entry: LogEntry = { kind: 'create', head: withoutLogSeq(head), history, effects, after: expected };
        const payload = JSON.stringify(entry);
        const { seq } = await this.log.append(head.orgId, head.machine, head.name, expected, payload, messageIdOf(head, payload, expected));
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
    this.outboxPositions?.delete(message.id);
    return this.local.removeOutbox(message);
  }

  updateOutbox(message: OutboxMessage): Promise<void> {
    return this.local.updateOutbox(message);
  }

  listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): TransitionRecord[] {
    return this.local.listTransitions(orgId, machine, name, afterSeq, limit);
  }

  /** This node's copy: every commit its follower (or this node as owner) applied, with the heads. */
  queryIndex(query: IndexQuery): IndexPosition[] {
    return this.local.queryIndex(query);
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
    let latest = this.latest.get(key);
    if (latest === undefined) {
      latest = this.local.getInstance(head.orgId, head.machine, head.name)?.logSeq ?? 0;
      this.noteLatest(key, latest);
    }
    return (head.logSeq ?? 0) >= latest;
  }

  /** Keeps an instance's latest log position (a bounded map, the one written longest ago first out). */
  private noteLatest(key: string, seq: number): void {
    if ((this.latest.get(key) ?? -1) >= seq) return;
    this.latest.delete(key);
    this.latest.set(key, seq);
    if (this.latest.size > LATEST_KEPT) this.latest.delete(this.latest.keys().next().value as string);
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
        const payload = JSON.stringify(entry);
        const { seq } = await this.log.append(orgId, machine, name, last, payload, messageIdOf(key, payload, last));
        await this.applyOwn(entry, seq);
        return;
      } catch (error) {
        if (!(error instanceof LogFencedError)) throw error;
        // (another write landed meanwhile: catch up with it and fence after it)
      }
    }
    throw unavailable(`instance ${name} of machine ${machine} is being written by another node; retry`);
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
    const after = previous.logSeq ?? 0;
    const entry: LogEntry = { ...body, after };
    const payload = JSON.stringify(entry);
    try {
      return {
        entry,
        seq: (await this.log.append(previous.orgId, previous.machine, previous.name, after, payload, messageIdOf(previous, payload, after)))
          .seq,
      };
    } catch (error) {
      if (!(error instanceof LogFencedError)) throw error;
      // Another node wrote the instance: let this node's copy catch up first, so that the runtime,
      // which drops its head and may run the request again, reloads the latest one (and a 503 when it
      // cannot: a run again on a stale copy would decide on a state that is not the instance's).
      await this.caughtUpStrictly(previous);
      throw new SequenceConflictError(previous.seq, undefined);
    }
  }

  /**
   * The read barrier: the log's last sequence (the instance's, or the whole stream's), then the local
   * watermark up to it (CATCH_UP_MS at most). With NATS out of reach it answers from the local copy
   * rather than not at all.
   */
  async caughtUp(orgId: string, machine?: string, name?: string): Promise<void> {
    const last = await (machine !== undefined && name !== undefined ? this.log.lastSeq(orgId, machine, name) : this.log.headSeq()).catch(
      () => 0,
    );
    await this.watermarkAt(last, CATCH_UP_MS);
  }

  /**
   * Waits (up to CATCH_UP_MS) until the local copy holds the instance's last logged entry, whose
   * position it returns; a 503 when the log cannot be asked or the copy is not there in time.
   */
  private async caughtUpStrictly(key: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): Promise<number> {
    let last: number;
    try {
      last = await this.log.lastSeq(key.orgId, key.machine, key.name);
    } catch (error) {
      throw unavailable(`the cluster's log cannot be read now (${error instanceof Error ? error.message : String(error)}); retry`);
    }
    await this.watermarkAt(last, CATCH_UP_MS);
    if (this.appliedSeq < last)
      throw unavailable(`this node's copy of instance ${key.name} of machine ${key.machine} is behind the cluster's log; retry`);
    return last;
  }

  /**
   * Refuses a commit of a request (a history record's request id, or the message it applies) that
   * another node fenced (see fence): that node runs it now, and this one must not apply it too.
   */
  private checkNotTakenOver(head: Pick<InstanceHead, 'name' | 'machine'>, history: TransitionRecord[], effects: CommitEffects): void {
    if (this.fenced.size === 0) return;
    const ids = history.map((record) => record.requestId).filter((id): id is string => id !== undefined);
    if (effects.receivedMessageId !== undefined) ids.push(effects.receivedMessageId);
    for (const id of ids) {
      const by = this.fenced.get(id);
      if (by !== undefined && by !== this.nodeId)
        throw new RequestMovedError(`request ${id} to instance ${head.name} of machine ${head.machine} was taken over by node ${by}`);
    }
  }

  /**
   * This node's own append, which counts (the log said so): applied to the local store now, unless the
   * copy is not where the append was made from (it lags the head the owner held); then the follower
   * applies it in its turn, waited for here (CATCH_UP_MS at most).
   */
  private async applyOwn(entry: LogEntry, seq: number): Promise<void> {
    if (!(await this.applyLocally(entry, seq, true))) await this.watermarkAt(seq, CATCH_UP_MS);
  }

  /**
   * Applies one log entry to the local store unless it already holds it (the owner applies its own
   * right after appending, and meets it again when following). One at a time per instance. Resolves
   * false for an own entry left to the follower (see applyOwn).
   */
  private applyLocally(entry: LogEntry, seq: number, own = false): Promise<boolean> {
    const key = keyOf(instanceOf(entry));
    const before = this.applying.get(key) ?? Promise.resolve();
    const run = before.then(async () => {
      const applied = await this.apply(entry, seq, own);
      this.noteLatest(key, seq);
      return applied;
    });
    const tail = run.catch(() => undefined);
    this.applying.set(key, tail);
    void tail.then(() => {
      if (this.applying.get(key) === tail) this.applying.delete(key);
    });
    return run;
  }

  /**
   * Every node's copy holds every outbox entry, and only the sender's owner delivers (and removes) its
   * own: the others remove theirs when the receiver's commit, which names the message, reaches them.
   * The sender's commit precedes the receiver's in the log, but applies of different instances overlap:
   * the entry is removed once every entry before the receiver's (`seq`) is applied here.
   */
  private dropDelivered(messageId: string | undefined, seq: number): void {
    if (messageId === undefined) return;
    this.deliveredLater.push({ before: seq - 1, messageId });
    if (this.appliedSeq >= seq - 1) this.dropDeliveredNow();
  }

  private dropDeliveredNow(): void {
    const at = this.appliedSeq;
    const due = this.deliveredLater.filter((drop) => drop.before <= at);
    if (due.length === 0) return;
    this.deliveredLater = this.deliveredLater.filter((drop) => drop.before > at);
    const positions = this.positions();
    for (const { messageId } of due) {
      const position = positions.get(messageId);
      if (!position) continue;
      positions.delete(messageId);
      const message = { id: messageId, position } as OutboxMessage;
      this.local
        .removeOutbox(message)
        .catch((error: unknown) => this.onError(`could not drop delivered message ${messageId} from the outbox`, error));
    }
  }

  /** The outbox's positions by message id, read whole once (it holds what is still to deliver: few). */
  private positions(): Map<string, [number, number]> {
    if (!this.outboxPositions) {
      this.outboxPositions = new Map(this.local.listOutbox(Number.MAX_SAFE_INTEGER).map((message) => [message.id, message.position]));
    }
    return this.outboxPositions;
  }

  private notePositions(effects: CommitEffects): void {
    if (!effects.outbox?.length) return;
    const positions = this.positions();
    for (const message of effects.outbox) positions.set(message.id, message.position);
  }

  /**
   * Applies one entry at stream sequence `seq`, in its instance's turn. An entry the copy holds already
   * (its position is there or past it: this node's own write, a replay after a restart) is passed by.
   * An entry that does not count, because another entry of its instance came between the one it names
   * and it, only moves the instance's log position (the next append must name it for JetStream to take
   * it). `own`: this node's append, known to count; false is resolved when it is left to the follower.
   */
  private async apply(entry: LogEntry, seq: number, own: boolean): Promise<boolean> {
    const { orgId, machine, name } = instanceOf(entry);
    const key = keyOf({ orgId, machine, name });
    const current = this.local.getInstance(orgId, machine, name);
    const position = current ? (current.logSeq ?? 0) : this.headless.get(key);
    if (position !== undefined && position >= seq) return true;
    if (own) {
      if (position !== undefined && position !== entry.after) return false;
    } else if (!(await this.counts(entry, seq, position))) {
      if (current) await this.local.replaceHead({ ...current, logSeq: seq }, current);
      else this.noteHeadless(key, seq);
      return true;
    }
    switch (entry.kind) {
      case 'create': {
        // (a create that counts finds no head; one that finds it changes nothing but the position)
        if (current) {
          await this.local.replaceHead({ ...current, logSeq: seq }, current);
          return true;
        }
        this.notePositions(entry.effects);
        await this.local.createInstance({ ...entry.head, logSeq: seq }, entry.history, entry.effects);
        this.headless.delete(key);
        this.dropDelivered(entry.effects.receivedMessageId, seq);
        this.noteTimers(entry.head);
        return true;
      }
      case 'commit': {
        if (!current) break;
        this.notePositions(entry.effects);
        await this.local.commit({ ...entry.head, logSeq: seq }, current, entry.history, entry.effects);
        this.dropDelivered(entry.effects.receivedMessageId, seq);
        this.noteTimers(entry.head);
        return true;
      }
      case 'head': {
        if (!current) break;
        await this.local.replaceHead({ ...entry.head, logSeq: seq }, current);
        this.noteTimers(entry.head);
        return true;
      }
      case 'received': {
        if (!current) break;
        await this.local.markReceived(orgId, machine, name, entry.messageId);
        // (the head's log position moves too, so the next append expects this entry)
        await this.local.replaceHead({ ...current, logSeq: seq }, current);
        this.dropDelivered(entry.messageId, seq);
        return true;
      }
      case 'fence': {
        this.fenced.delete(entry.requestId);
        this.fenced.set(entry.requestId, entry.by);
        if (this.fenced.size > FENCES_KEPT) this.fenced.delete(this.fenced.keys().next().value as string);
        if (!current) break;
        // (the head's log position moves, so that the next append expects the fence)
        await this.local.replaceHead({ ...current, logSeq: seq }, current);
        return true;
      }
      case 'delete':
        await this.local.deleteInstance(orgId, machine, name);
        break;
    }
    // (no head here now: the instance's position is kept beside the heads)
    this.noteHeadless(key, seq);
    return true;
  }

  /**
   * Whether an entry counts: it names the instance's entry right before it. That is the copy's position
   * of the instance when it has one (a head's, or a headless instance's); when it has none, the instance
   * has no entry before, if the follower started at the stream's start and forgot no position; else the
   * log is asked (an instance deleted before this process started: rare), again until it answers.
   */
  private async counts(entry: LogEntry, seq: number, position: number | undefined): Promise<boolean> {
    if (entry.after === undefined) return true;
    if (position !== undefined) return entry.after === position;
    if (this.followedFromStart && !this.headlessForgotten) return entry.after === 0;
    const { orgId, machine, name } = instanceOf(entry);
    for (let attempt = 0; ; attempt++) {
      try {
        return (await this.log.firstAfter(orgId, machine, name, entry.after)) === seq;
      } catch (error) {
        if (this.stopped) throw error;
        if (attempt === 0)
          this.onError(
            `could not ask the TX log whether entry ${seq} of instance ${name} of machine ${machine} counts; asking again`,
            error,
          );
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
      }
    }
  }

  private noteHeadless(key: string, seq: number): void {
    this.headless.delete(key);
    this.headless.set(key, seq);
    if (this.headless.size > HEADLESS_KEPT) {
      this.headless.delete(this.headless.keys().next().value as string);
      this.headlessForgotten = true;
    }
  }
}

/** Instances whose latest log position is kept in memory (isCurrent looks the others up in the copy). */
const LATEST_KEPT = 100_000;

/** Fenced requests remembered (a fence matters only while the request it fences may still be under way elsewhere: seconds). */
const FENCES_KEPT = 10_000;

/** Positions of instances without a head kept in memory (past it, the log is asked; see counts). */
const HEADLESS_KEPT = 100_000;

/** JetStream's header for the expected last subject sequence: what entries written before 2026-11-28 say instead of `after`. */
const EXPECTED_HEADER = 'Nats-Expected-Last-Subject-Sequence';

const positionOf = (header: string | undefined): number | undefined => {
  if (header === undefined || header === '') return undefined;
  const value = Number(header);
  return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
};

/** The instance an entry is of. */
const instanceOf = (entry: LogEntry): Pick<InstanceHead, 'orgId' | 'machine' | 'name'> =>
  entry.kind === 'create' || entry.kind === 'commit' || entry.kind === 'head' ? entry.head : entry;

/** TX entries applied side by side at most while following. */
const MAX_PENDING = 256;

/** How long a fenced writer waits for its copy to catch up with the log before giving up the request. */
const CATCH_UP_MS = 2_000;

const keyOf = (head: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): string => `${head.orgId}/${head.machine}/${head.name}`;

/**
 * The message id of an append: the instance, the log position it follows and a hash of the entry. A
 * retry of the same append (its acknowledgement lost) is then recognised by JetStream as a duplicate
 * and answered with the first one's sequence; any other entry at that position, from another node or
 * from a later attempt here, is not a duplicate and meets the expected-sequence check (fenced).
 */
const messageIdOf = (head: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>, payload: string, after = 0): string =>
  `${keyOf(head)}:${after}:${createHash('sha256').update(payload).digest('base64url').slice(0, 22)}`;

const withoutLogSeq = (head: InstanceHead): InstanceHead => {
  const { logSeq: _logSeq, ...rest } = head;
  return rest;
};
