import type { Database, RootDatabase } from 'lmdb';
import {
  type CommitEffects,
  type DueTimer,
  type OutboxMessage,
  type InstanceHead,
  type InstanceStore,
  SequenceConflictError,
  type TransitionRecord,
  type UsageDelta,
  usageMonth,
} from '../instance-store.js';

const AFTER_ALL = '\uffff';

/** In the `meta` db: the heads' format; 2 = heads carry their sequence as their LMDB entry version. */
const HEADS_FORMAT_KEY = 'instances-format';
const HEADS_FORMAT = 2;

type HeadKey = [string, string, string];

const keyOf = (head: InstanceHead): HeadKey => [head.orgId, head.machine, head.name];

/**
 * LMDB layout:
 *   instances   [orgId, machine, name]      -> InstanceHead, entry version = head.seq
 *                                              (the catalog reads this db's keys for hasInstances)
 *   transitions [orgId, machine, name, seq] -> TransitionRecord
 *   usage       [orgId, 'YYYY-MM']          -> UsageDelta
 *   timers      [dueAt, orgId, machine, name, timerId] -> true   (due-time index of pendingTimers)
 *   outbox      position                    -> OutboxMessage  (messages between instances)
 *   inbox       [orgId, machine, name, messageId] -> ts      (messages an instance applied)
 *
 * Commits are sequence-checked (fencing): a write names the head it replaces and lands only if the
 * stored head's version is still that head's sequence. The owner passes the head it replaces, so a
 * commit never reads the stored head back (decoding it cost more than the rest of the commit); one
 * process owns a data dir, and the owner's mailbox gives each instance one writer.
 *
 * Commits are conditional blocks of lmdb-js's batched asynchronous transactions: the condition is
 * checked on LMDB's writer thread, so the write transaction never waits for this thread, and many
 * actors share one disk sync (group commit). The promise resolves only once the transaction is synced
 * to disk. (Tried: writing a lone commit synchronously on this thread to save the two thread
 * hand-offs; no measurable gain at concurrency 1, and under load it blocked this thread during syncs.)
 * Usage counters are not part of commits (one more page in every sync): the runtime adds them in
 * batches.
 */
export class LmdbInstanceStore implements InstanceStore {
  private readonly heads: Database<InstanceHead, HeadKey>;
  private readonly transitions: Database<TransitionRecord, [string, string, string, number]>;
  private readonly usage: Database<UsageDelta, [string, string]>;
  private readonly timers: Database<true, [number, string, string, string, string]>;
  private readonly outbox: Database<OutboxMessage, [number, number]>;
  private readonly inbox: Database<number, [string, string, string, string]>;

  constructor(private readonly root: RootDatabase) {
    this.heads = root.openDB({ name: 'instances', encoding: 'msgpack', useVersions: true });
    this.transitions = root.openDB({ name: 'transitions', encoding: 'msgpack' });
    this.usage = root.openDB({ name: 'usage', encoding: 'msgpack' });
    this.timers = root.openDB({ name: 'timers', encoding: 'msgpack' });
    this.outbox = root.openDB({ name: 'outbox', encoding: 'msgpack' });
    this.inbox = root.openDB({ name: 'inbox', encoding: 'msgpack' });
    this.upgradeHeads();
  }

  getInstance(orgId: string, machine: string, name: string): InstanceHead | undefined {
    return this.heads.get([orgId, machine, name]);
  }

  listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): InstanceHead[] {
    const out: InstanceHead[] = [];
    for (const { key, value } of this.heads.getRange({ start: [orgId, machine, afterName ?? ''], end: [orgId, machine, AFTER_ALL] })) {
      if (key[2] === afterName) continue;
      out.push(value);
      if (out.length >= limit) break;
    }
    return out;
  }

  async createInstance(head: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<boolean> {
    let failure: { error: unknown } | undefined;
    const created = await this.heads.ifNoExists(keyOf(head), () => {
      failure = this.allOrNothing(
        () => {
          this.putHead(head, undefined);
          this.appendHistory(head, history);
          this.writeEffects(head, effects);
        },
        () => {
          void this.heads.remove(keyOf(head));
          this.undoAppend(head, history, effects);
        },
      );
    });
    if (failure) throw failure.error;
    return created;
  }

  async commit(head: InstanceHead, previous: InstanceHead, history: TransitionRecord[], effects: CommitEffects = {}): Promise<void> {
    let failure: { error: unknown } | undefined;
    const written = await this.heads.ifVersion(keyOf(head), previous.seq, () => {
      failure = this.allOrNothing(
        () => {
          this.putHead(head, previous);
          this.appendHistory(head, history);
          this.writeEffects(head, effects);
        },
        () => {
          void this.heads.put(keyOf(previous), previous, previous.seq);
          this.undoAppend(head, history, effects, previous);
        },
      );
    });
    if (failure) throw failure.error;
    if (!written) throw this.conflict(previous);
  }

  /**
   * Runs the writes of a conditional block; if one throws (a value that cannot be encoded), writes the
   * previous values back in the same block. lmdb-js commits what a block queued before the throw, so
   * without this a failed commit could leave a new head without its history record.
   */
  private allOrNothing(write: () => void, undo: () => void): { error: unknown } | undefined {
    try {
      write();
      return undefined;
    } catch (error) {
      undo();
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
    for (const timer of head.pendingTimers) attempt(() => void this.timers.remove([timer.dueAt, head.orgId, head.machine, head.name, timer.id]));
    for (const record of history) attempt(() => void this.transitions.remove([head.orgId, head.machine, head.name, record.seq]));
    for (const message of effects.outbox ?? []) attempt(() => void this.outbox.remove(message.position));
    const received = effects.receivedMessageId;
    if (received !== undefined) attempt(() => void this.inbox.remove([head.orgId, head.machine, head.name, received]));
    for (const timer of previous?.pendingTimers ?? []) attempt(() => void this.timers.put([timer.dueAt, head.orgId, head.machine, head.name, timer.id], true));
  }

  hasReceived(orgId: string, machine: string, name: string, messageId: string): boolean {
    return this.inbox.get([orgId, machine, name, messageId]) !== undefined;
  }

  async markReceived(orgId: string, machine: string, name: string, messageId: string): Promise<void> {
    await this.inbox.put([orgId, machine, name, messageId], Date.now());
  }

  listOutbox(limit: number): OutboxMessage[] {
    return [...this.outbox.getRange({ limit }).map(({ value }) => value)];
  }

  async removeOutbox(message: OutboxMessage): Promise<void> {
    await this.outbox.remove(message.position);
  }

  async updateOutbox(message: OutboxMessage): Promise<void> {
    await this.outbox.put(message.position, message);
  }

  async replaceHead(head: InstanceHead, previous: InstanceHead): Promise<void> {
    const written = await this.heads.ifVersion(keyOf(head), previous.seq, () => this.putHead(head, previous));
    if (!written) throw this.conflict(previous);
  }

  deleteInstance(orgId: string, machine: string, name: string): Promise<boolean> {
    return this.root.transaction(() => {
      const current = this.heads.get([orgId, machine, name]);
      if (current === undefined) return false;
      void this.heads.remove([orgId, machine, name]);
      this.indexTimers(current, undefined);
      for (const key of this.transitions.getKeys({ start: [orgId, machine, name, 0], end: [orgId, machine, name, Number.MAX_SAFE_INTEGER] })) {
        void this.transitions.remove(key);
      }
      for (const key of this.inbox.getKeys({ start: [orgId, machine, name, ''], end: [orgId, machine, name, AFTER_ALL] })) {
        void this.inbox.remove(key);
      }
      return true;
    });
  }

  listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): TransitionRecord[] {
    const out: TransitionRecord[] = [];
    for (const { value } of this.transitions.getRange({ start: [orgId, machine, name, afterSeq + 1], end: [orgId, machine, name, Number.MAX_SAFE_INTEGER], limit })) {
      out.push(value);
    }
    return out;
  }

  listDueTimers(uptoMs: number, limit: number): DueTimer[] {
    const out: DueTimer[] = [];
    for (const key of this.timers.getKeys({ start: [0], end: [uptoMs, AFTER_ALL], limit })) {
      const [dueAt, orgId, machine, name, timerId] = key;
      out.push({ dueAt, orgId, machine, name, timerId });
    }
    return out;
  }

  nextTimerDue(): number | undefined {
    for (const key of this.timers.getKeys({ limit: 1 })) return key[0];
    return undefined;
  }

  async removeDueTimers(entries: DueTimer[]): Promise<void> {
    await this.root.transaction(() => {
      for (const e of entries) void this.timers.remove([e.dueAt, e.orgId, e.machine, e.name, e.timerId]);
    });
  }

  async addUsage(orgId: string, usage: UsageDelta): Promise<void> {
    await this.root.transaction(() => this.bumpUsage(orgId, usage));
  }

  getUsage(orgId: string, month: string): UsageDelta {
    return this.usage.get([orgId, month]) ?? { transitions: 0, reads: 0 };
  }

  private conflict(previous: InstanceHead): SequenceConflictError {
    return new SequenceConflictError(previous.seq, this.heads.getEntry(keyOf(previous))?.version);
  }

  private putHead(head: InstanceHead, previous: InstanceHead | undefined): void {
    // The entry's version is the head's sequence: what the next commit's condition names.
    void this.heads.put(keyOf(head), head, head.seq);
    this.indexTimers(previous, head);
  }

  /** Keeps the due-time index equal to the heads' pending timers: drop the old head's, add the new's. */
  private indexTimers(previous: InstanceHead | undefined, next: InstanceHead | undefined): void {
    const keysOf = (head: InstanceHead | undefined) =>
      head ? head.pendingTimers.map((timer): [number, string, string, string, string] => [timer.dueAt, head.orgId, head.machine, head.name, timer.id]) : [];
    for (const key of keysOf(previous)) void this.timers.remove(key);
    for (const key of keysOf(next)) void this.timers.put(key, true);
  }

  /**
   * Heads written before they carried versions (format 1) are rewritten once, with their sequence
   * as version; read through a handle that does not expect versions.
   */
  private upgradeHeads(): void {
    const meta = this.root.openDB<number, string>({ name: 'meta', encoding: 'msgpack' });
    if (meta.get(HEADS_FORMAT_KEY) === HEADS_FORMAT) return;
    const legacy = this.root.openDB<InstanceHead, HeadKey>({ name: 'instances', encoding: 'msgpack' });
    this.root.transactionSync(() => {
      const heads = [...legacy.getRange({})];
      for (const { key, value } of heads) void this.heads.put(key, value, value.seq);
      void meta.put(HEADS_FORMAT_KEY, HEADS_FORMAT);
    });
  }

  private writeEffects(head: InstanceHead, effects: CommitEffects): void {
    for (const message of effects.outbox ?? []) void this.outbox.put(message.position, message);
    if (effects.receivedMessageId !== undefined) void this.inbox.put([head.orgId, head.machine, head.name, effects.receivedMessageId], Date.now());
  }

  private appendHistory(head: InstanceHead, history: TransitionRecord[]): void {
    for (const record of history) void this.transitions.put([head.orgId, head.machine, head.name, record.seq], record);
  }

  private bumpUsage(orgId: string, usage: UsageDelta): void {
    if (usage.transitions === 0 && usage.reads === 0) return;
    const key: [string, string] = [orgId, usageMonth(Date.now())];
    const current = this.usage.get(key) ?? { transitions: 0, reads: 0 };
    void this.usage.put(key, { transitions: current.transitions + usage.transitions, reads: current.reads + usage.reads });
  }
}
