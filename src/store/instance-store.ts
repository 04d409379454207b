import type { IndexOp, IndexPosition, IndexValues } from '../domain/index-values.js';
import type { JsonObject, MachineEvent, PendingTimer, PersistedSnapshot, StateValue } from '../domain/machine-state.js';
import { ServiceError } from '../domain/errors.js';

export type InstanceStatus = 'running' | 'paused';

/**
 * The committed head of an instance: everything needed to answer reads and to rebuild its actor.
 * `seq` is the sequence of the last transition record; each commit names the seq it follows.
 */
export interface InstanceHead {
  orgId: string;
  machine: string;
  name: string;
  createdAt: string;
  versionId: string;
  status: InstanceStatus;
  seq: number;
  /** When this state was committed, ms since epoch; strictly increasing per instance. */
  ts: number;
  state: StateValue;
  context: JsonObject;
  tags: string[];
  done: boolean;
  /** JSON of the machine's snapshot without value and context (sandbox/snapshot.ts); an object in heads written before. */
  snapshot: string | PersistedSnapshot;
  /** Delayed events still scheduled (event kind only), with their due times. */
  pendingTimers: PendingTimer[];
  /** Children stopped when settling timed out: an error event for each goes in before the next event. */
  stoppedChildren: string[];
  /** Failed deliveries so far, by pending timer id; a timer is retried a few times, then dropped. */
  timerAttempts: Record<string, number>;
  /** The instance that spawned this one as a persistent child: where `sendParent` goes. */
  parent?: { machine: string; name: string };
  /**
   * The version the instance is to be upgraded to (`PUT .../v`, wire-protocol §3.4, §8.5), when one is
   * pending: a chain of migrations led there from `versionId` when it was set.
   */
  targetVersionId?: string;
  /**
   * What this head puts in its machine's indexes, selected from `context` by its version's selectors
   * (runtime/index-values.ts). Stores keep their index entries equal to it in the commit that writes the
   * head; it travels in the head so that a cluster's followers and a write-ahead log's replay write the
   * same entries. Absent when the version selects nothing.
   */
  indexValues?: IndexValues;
  /** Set on an instance machine code made: how many such instances in a row led to it (instance-runtime.ts). */
  madeDepth?: number;
  /**
   * In a cluster: the TX log's stream sequence of the instance's last commit, which its next append
   * names (JetStream's expected last subject sequence). Absent in the embedded node.
   */
  logSeq?: number;
}

/**
 * A message from one instance to another, written in the sender's commit and removed once the
 * receiver's commit (which records its id) is durable: delivered once, even across crashes.
 */
export interface OutboxMessage {
  id: string;
  orgId: string;
  /** Position in the outbox: messages to one target are delivered in this order. */
  position: [number, number];
  from: { machine: string; name: string };
  /** The sender's `madeDepth` when it was made by an instance itself: an instance it makes is one deeper. */
  fromMadeDepth?: number;
  to: { machine: string; name: string };
  kind: 'spawn' | 'send';
  event?: JsonObject;
  spawn?: { versionId?: string; context?: JsonObject };
  attempts: number;
  nextAttemptAt: number;
}

/** What a commit writes besides the head and history. */
export interface CommitEffects {
  /** Messages to deliver after this commit. */
  outbox?: OutboxMessage[];
  /** The id of the message this commit applied, so a redelivery is recognised. */
  receivedMessageId?: string;
}

/** An entry of the due-time index of pending timers: which instance to wake, and when. */
export interface DueTimer {
  dueAt: number;
  orgId: string;
  machine: string;
  name: string;
  timerId: string;
}

/**
 * One entry of an instance's linear history: the event and the state it led to. Not the context: the
 * history is read as `{ createdAt, state, event }` (wire-protocol §3.4), and the head holds the
 * context; carrying it in every record doubled what each event wrote (WAL frame, LMDB, the cluster's
 * TX log). Records written before 2026-11-29 still hold one, which nothing reads.
 */
export interface TransitionRecord {
  seq: number;
  /**
   * The id of the request whose event this record applied, when it came with one (a cluster node's
   * forwarder gives each create and send one): a retry of that request finds it here and is not
   * applied again.
   */
  requestId?: string;
  createdAt: string;
  ts: number;
  event: MachineEvent;
  state: StateValue;
}

export interface UsageDelta {
  transitions: number;
  reads: number;
}

/** One billing month of an org: its totals and each machine's share. */
export interface UsageMonth extends UsageDelta {
  month: string;
  machines: Array<UsageDelta & { machine: string }>;
}

/** A page of one index of a machine (GET /machines/{m}/indexes/{index}/query). */
export interface IndexQuery {
  orgId: string;
  machine: string;
  index: string;
  /** Only values that pass `op` against `value`; every value when absent. */
  filter?: { op: IndexOp; value: string };
  /** Descending index order instead of ascending. */
  descending: boolean;
  /** The page starts after this position (in the query's direction). */
  after?: IndexPosition;
  limit: number;
}

/** Thrown when a commit does not follow the sequence it names: someone else wrote the instance. */
export class SequenceConflictError extends Error {
  constructor(
    readonly expectedSeq: number,
    readonly actualSeq: number | undefined,
  ) {
    super(`instance head moved: expected seq ${expectedSeq}, found ${actualSeq ?? 'none'}`);
    this.name = 'SequenceConflictError';
  }
}

/**
 * Thrown instead of a commit of a request that another node took over (a cluster's forwarder asked
 * that node again after this one did not answer in time: log-instance-store.ts, `fence`). Nothing was
 * written; whoever still waits for this node's answer asks the instance's owner again.
 */
export class RequestMovedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestMovedError';
  }
}

/**
 * A write the store may or may not have made durable (a cluster's log took it, or not, and its answer
 * was lost): a 503 to the client, who reads the instance and retries. `stored` asks the store, on first
 * use, until it can tell (false when it cannot within its time), so what counts writes (usage) counts
 * this one if it was made: a retry answered from the history counts nothing.
 */
export class UncertainWriteError extends ServiceError {
  private asked: Promise<boolean> | undefined;

  constructor(
    message: string,
    private readonly whetherStored: () => Promise<boolean>,
  ) {
    super(503, 'unavailable', message);
    this.name = 'UncertainWriteError';
  }

  get stored(): Promise<boolean> {
    this.asked ??= this.whetherStored().catch(() => false);
    return this.asked;
  }
}

/**
 * Instance heads and their histories. Writes resolve once durable; concurrent writes of many
 * instances share one disk sync (group commit).
 */
export interface InstanceStore {
  /** Why this store refuses writes now (LMDB failed a commit: until the node restarts); undefined while it takes them. */
  writeRefusal?(): Error | undefined;
  /**
   * Whether `head`, as an owner holds it in memory, is still the latest this store has of the instance
   * (a cluster node's copy also gets other nodes' commits: a head held across a pause or a change of
   * owner can be older). Absent where only the owner writes the store (the embedded node).
   */
  isCurrent?(head: InstanceHead): boolean;
  /**
   * Resolves once this store's copy holds every commit acknowledged before the call (of the one
   * instance when `name` is given, else of all): a read after it sees every write acknowledged before
   * it, through whichever node. At once where the copy is the truth (the embedded node).
   */
  caughtUp(orgId: string, machine?: string, name?: string): Promise<void>;
  getInstance(orgId: string, machine: string, name: string): InstanceHead | undefined;
  listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): InstanceHead[];
  /** false when the instance already exists. */
  createInstance(head: InstanceHead, history: TransitionRecord[], effects?: CommitEffects): Promise<boolean>;
  /**
   * Replaces `previous` (the head as its owner last committed it) with `head` and appends to the
   * history, if the stored head is still at `previous.seq`; SequenceConflictError otherwise.
   */
  commit(head: InstanceHead, previous: InstanceHead, history: TransitionRecord[], effects?: CommitEffects): Promise<void>;
  /** Whether the instance already applied that message. */
  hasReceived(orgId: string, machine: string, name: string, messageId: string): boolean;
  /** Records a message as applied without any other change (a spawn of an instance that exists). */
  markReceived(orgId: string, machine: string, name: string, messageId: string): Promise<void>;
  /** Outbox messages, oldest first. */
  listOutbox(limit: number): OutboxMessage[];
  removeOutbox(message: OutboxMessage): Promise<void>;
  updateOutbox(message: OutboxMessage): Promise<void>;
  /** Head-only change (status, timer retries) at the same sequence; same check as commit. */
  replaceHead(head: InstanceHead, previous: InstanceHead): Promise<void>;
  /** Removes the head and the whole history. false when it did not exist. */
  deleteInstance(orgId: string, machine: string, name: string): Promise<boolean>;
  listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): TransitionRecord[];
  /**
   * Entries of one index in index order (value, then instance name): one per value an instance's head
   * holds there (`indexValues`). Written in the same transaction as the heads, so they always match
   * the committed heads, including acknowledged commits not yet in LMDB.
   */
  queryIndex(query: IndexQuery): IndexPosition[];
  /**
   * Pending timers of every instance ordered by due time, up to `uptoMs`. The index always matches
   * the committed heads' `pendingTimers`, including acknowledged commits not yet in LMDB.
   */
  listDueTimers(uptoMs: number, limit: number): DueTimer[];
  /** The earliest due time in the index, if any. */
  nextTimerDue(): number | undefined;
  /** Removes index entries that no head lists any more (left by a crash between versions of this code). */
  removeDueTimers(entries: DueTimer[]): Promise<void>;
  /**
   * Adds to the org's counters of the month of `atMs` (default now), and to the machine's when named.
   * `position` is the count's place in a log that can hand it over again (the cluster's META stream
   * sequence, replayed from a checkpoint after a crash): a count at or before the last position kept
   * was kept already, and is not added again. `counted`, when given, is what the counting process has
   * counted so far for this org, month and machine: what is added is then by how much it exceeds the
   * last such totals kept of that process (so a count lost, repeated or seen out of order on its way is
   * made good, or ignored, by the next one), and `usage` is not used.
   */
  addUsage(orgId: string, usage: UsageDelta, machine?: string, atMs?: number, position?: number, counted?: CountedSoFar): Promise<void>;
  getUsage(orgId: string, month: string): UsageDelta;
  /** The org's months that have counts, newest first, at most `months` of them. */
  listUsage(orgId: string, months: number): UsageMonth[];
}

/** One counting process's totals so far, for one org, month and machine (see InstanceStore.addUsage). */
export interface CountedSoFar {
  /** The process's run: a new id each time it starts, so that its totals start from nothing. */
  run: string;
  totals: UsageDelta;
}

/** Billing month of a timestamp, `YYYY-MM` in UTC. */
export const usageMonth = (ms: number): string => new Date(ms).toISOString().slice(0, 7);
