import {
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  type PubAck,
  RetentionPolicy,
  StorageType,
  type StoredMsg,
  type StreamInfo,
  DiscardPolicy,
} from '@nats-io/jetstream';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { payloadTooLarge, ServiceError } from '../../domain/errors.js';
import { UncertainWriteError } from '../instance-store.js';
import { DEFAULT_PARTITIONS, MAX_PARTITIONS, partitionOf } from '../../domain/partitions.js';
import { withinMs } from '../../domain/within-ms.js';
import { ASKED_AGAIN_FOR_MS, firstMessageFrom, leaderMessage } from './stream-gets.js';
import { ENTRY_ID_HEADER, entryIdOf } from './log-entries.js';
import type { FollowedMessage } from './stream-follower.js';
import { openingManager } from './stream-opening.js';

/** An append refused because the instance's log moved past what the writer expected: it is not the owner any more. */
export class LogFencedError extends Error {
  constructor(
    readonly subject: string,
    readonly expected: number,
  ) {
    super(`the log of ${subject} moved past sequence ${expected}: another node wrote it`);
    this.name = 'LogFencedError';
  }
}

interface TransitionLogOptions {
  /** Names the cluster: its stream is `STATEHOLD_<cluster>_TX`. */
  cluster: string;
  /** JetStream replicas (1 on one nats-server, 3 on a three-server cluster). */
  replicas: number;
  /** The stream's duplicate window, made with it (appends carry no `Nats-Msg-Id`: see ENTRY_ID_HEADER). */
  duplicateWindowMs?: number;
  /** Partitions of a log made now (DEFAULT_PARTITIONS when not given); a log that exists keeps its own. */
  partitions?: number;
}

/**
 * Whether the entry just appended at a stream sequence counts, as the writer's own copy of its
 * partition tells once it followed the log past it (its readers' rule, the same); undefined when that
 * copy cannot tell (not held here, or not there in time): the log is asked then.
 */
export type CountsHere = (seq: number) => Promise<boolean | undefined>;

interface Appended {
  /** The stream sequence of this commit: the instance's next append expects it. */
  seq: number;
  /** True when a retried append found its own first copy counting there: the retry's copy, if stored, does not count. */
  duplicate: boolean;
}

/** A follower not heard from by its stream's leader for longer (ns; the leader hears from each about every second) is counted out. */
const FOLLOWER_SILENCE_NS = 3_000_000_000;

/** An append whose answer did not come is asked again this many times (same entry id), each waiting this long. */
const APPEND_RETRIES = 3;
const APPEND_RETRY_TIMEOUT_MS = 2_000;

/**
 * How long a node that opens a replicated TX stream without a leader waits for one before it goes on. A
 * stream just made by another node has none for a moment, and a question to it then goes unanswered: each
 * partition's catch-up waited out the client's 5 s timeout (measured: a 3-node cluster served 8 s after
 * start instead of 3). Bounded: a node that starts while its streams have no quorum still starts, and
 * answers 503 until they do.
 */
const LEADER_WAIT_MS = 5_000;

/**
 * How long an append the log may or may not have stored is asked after (UncertainWriteError's
 * `stored`), first after a second, then each time twice as long up to 8 s: long enough for a leader
 * election and a client's reconnect, so the answer is known rather than given up on.
 */
const UNCERTAIN_ASKED_FOR_MS = 60_000;
const UNCERTAIN_ASKED_EVERY_MS = 1_000;
const UNCERTAIN_ASKED_EVERY_MAX_MS = 8_000;

/** JetStream's API error code for a publish whose expected last subject sequence did not match. */
const WRONG_LAST_SEQUENCE = 10071;

/**
 * The cluster's durable log of instance commits: one JetStream stream, one subject per instance
 * (`statehold.<cluster>.tx.<partition>.<org>.<machine>.<instance>`; names are single NATS tokens), so
 * that a partition's entries are one filter (`…tx.<partition>.>`) its owner follows. An append names
 * the stream sequence of the instance's previous commit (JetStream's expected last subject sequence),
 * so a node that lost ownership cannot write (LogFencedError), and carries an entry id (ENTRY_ID_HEADER),
 * so a retried append recognises its own first copy. An acknowledgement means the configured replicas
 * have it (NATS 2.9 acknowledges before an fsync; design.md §4).
 *
 * JetStream's check is not enough on its own: on a clustered stream a 2.9 server (Debian's 2.9.10;
 * fixed in 2.9.21, nats-server#4320) checks the expected sequence before it proposes the message, not
 * as part of the replicated write, so appends that name the same position and arrive together are all
 * stored (measured here: two or three of three concurrent appends in 40–45 % of rounds on R3); the fix
 * keeps the check on the stream leader, outside the replicated write (nats-server#8469). So an entry
 * counts only when it is its instance's first after the entry it names: readers skip the others (LogInstanceStore),
 * and append resolves only for an entry that counts; one stored after another entry of its instance is
 * refused like an append JetStream refused (LogFencedError), though it is in the stream.
 */
export class JetStreamTransitionLog {
  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly stream: string,
    private readonly prefix: string,
    /** How many partitions the log's instances are divided into (fixed when the stream was made). */
    readonly partitions: number,
  ) {}

  /** Whether the last check (unwritable) found the log writable. */
  private writable = true;
  private appendsObserver: ((failure: string | undefined) => void) | undefined;
  /** Questions for the instance's first entry after a position, shared by the uncertain appends at it (firstIdAfter). */
  private readonly firstIdsAsked = new Map<string, Promise<string | undefined>>();
  /** Questions waiting for the log to take writes again (lastSeqOfPartition). */
  private readonly writableWaiters = new Set<() => void>();

  static async open(nc: NatsConnection, options: TransitionLogOptions): Promise<JetStreamTransitionLog> {
    const jsm = await jetstreamManager(nc);
    const stream = `STATEHOLD_${options.cluster}_TX`;
    const prefix = `statehold.${options.cluster}.tx`;
    const wanted = options.partitions ?? DEFAULT_PARTITIONS;
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > MAX_PARTITIONS)
      throw new Error(`--partitions must be an integer from 1 to ${MAX_PARTITIONS}, not ${wanted}`);
    const config = {
      name: stream,
      description: describe(wanted),
      subjects: [`${prefix}.>`],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      num_replicas: options.replicas,
      duplicate_window: (options.duplicateWindowMs ?? 120_000) * 1_000_000,
      // The history is the truth: nothing is dropped by age or count.
      max_age: 0,
      max_msgs: -1,
      max_bytes: -1,
    };
    const opening = await openingManager(nc);
    try {
      await opening.streams.info(stream);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || error.status !== 404) throw error;
      await opening.streams.add(config);
    }
    // Read back: a 2.9 server ignores settings it does not know rather than refusing them (measured-here.md).
    let info = await opening.streams.info(stream);
    if (partitionsOf(info.config.description) === undefined) {
      // A stream made by a release before partitions: its entries' subjects name no partition.
      if (info.state.messages > 0)
        throw new Error(
          `stream ${stream} was written by a Statehold release before partitioned logs (its subjects name no partition): start this release on a new cluster name (--cluster), see cluster/README.md`,
        );
      info = await jsm.streams.update(stream, { ...info.config, description: describe(wanted) });
    }
    if (info.config.num_replicas !== options.replicas) {
      throw new Error(
        `stream ${stream} has ${info.config.num_replicas} replicas, not the ${options.replicas} asked for: change it with the nats CLI or use --replicas ${info.config.num_replicas}`,
      );
    }
    await leaderElected(jsm, stream, info, LEADER_WAIT_MS);
    return new JetStreamTransitionLog(jetstream(nc), jsm, stream, prefix, partitionsOf(info.config.description) ?? wanted);
  }

  partitionOf(orgId: string, machine: string, name: string): number {
    return partitionOf(orgId, machine, name, this.partitions);
  }

  subjectOf(orgId: string, machine: string, name: string): string {
    return `${this.prefix}.${this.partitionOf(orgId, machine, name)}.${orgId}.${machine}.${name}`;
  }

  /** Every entry of one partition: what its owner follows. */
  partitionSubject(partition: number): string {
    return `${this.prefix}.${partition}.>`;
  }

  /**
   * The stream sequence of the partition's last entry, 0 when it has none: its owner has caught up once
   * it applied it. Asked while the log had no leader (a nats-server lost, an election), the question may
   * go unanswered until the client's 5 s timeout: it is asked again as soon as the log takes writes again
   * (a new owner's catch-up had waited out those 5 s: cluster/README.md, What is left, 14). Not asked
   * with a shorter timeout instead: the server still runs every question the client gave up on (a scan
   * of the partition's subjects), and a node cut off from NATS piled up so many that its /health's
   * question waited behind them after the heal.
   */
  async lastSeqOfPartition(partition: number): Promise<number> {
    const asked = this.askLastSeqOfPartition(partition);
    if (this.writable) return asked;
    asked.catch(() => undefined);
    const again = this.writableAgain();
    try {
      const answered = await Promise.race([asked.then((seq) => ({ seq })), again.promise.then(() => undefined)]);
      return answered?.seq ?? (await this.askLastSeqOfPartition(partition));
    } finally {
      // (answered first, or failed: a question asked every 2 s through a long outage leaves nothing behind)
      again.cancel();
    }
  }

  private async askLastSeqOfPartition(partition: number): Promise<number> {
    try {
      const message = await leaderMessage(this.jsm, this.stream, { last_by_subj: this.partitionSubject(partition) });
      return message?.seq ?? 0;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.status === 404) return 0;
      throw error;
    }
  }

  private noteWritable(writable: boolean): void {
    const again = writable && !this.writable;
    this.writable = writable;
    if (!again) return;
    for (const resolve of this.writableWaiters) resolve();
    this.writableWaiters.clear();
  }

  /**
   * Appends one commit of an instance. `expectedSeq` is the stream sequence of the instance's previous
   * commit (0 for its first); `messageId` identifies this commit (the instance and its head sequence),
   * so a retry of an append whose answer was lost is not stored twice. Resolves only when the entry
   * counts: it is the instance's first entry after `expectedSeq` (see the class comment); otherwise
   * LogFencedError, as when JetStream refuses it.
   */
  async append(
    orgId: string,
    machine: string,
    name: string,
    expectedSeq: number,
    payload: Uint8Array | string,
    messageId: string,
    countsHere?: CountsHere,
  ): Promise<Appended> {
    try {
      const appended = await this.appendOnce(orgId, machine, name, expectedSeq, payload, messageId, countsHere);
      this.appendsObserver?.(undefined);
      return appended;
    } catch (error) {
      // (a commit too large for the log says nothing of whether the log takes writes)
      if (!(error instanceof ServiceError && error.status === 413))
        this.appendsObserver?.(error instanceof LogFencedError ? 'fenced: the log holds another entry at its position' : errorText(error));
      throw error;
    }
  }

  /** Told of each append's outcome: undefined when it counted, else why not (GET /health's WriteOutcomes). */
  observeAppends(observer: (failure: string | undefined) => void): void {
    this.appendsObserver = observer;
  }

  private async appendOnce(
    ...[orgId, machine, name, expectedSeq, payload, messageId, countsHere]: Parameters<JetStreamTransitionLog['append']>
  ): Promise<Appended> {
    const subject = this.subjectOf(orgId, machine, name);
    // (an append that may or may not have been stored counts if the instance's first entry after its position is its own)
    const uncertain = (message: string) =>
      new UncertainWriteError(message, async () => (await this.firstIdAfter(orgId, machine, name, expectedSeq)) === messageId);
    let ack: PubAck | undefined;
    // An append whose answer did not come (no leader for a moment, a timeout: this process paused, say)
    // may have been stored: asked again, JetStream refuses it if the first copy moved the position (its
    // expected sequence), and that copy is this append's own (its entry id); or stores it now. Without
    // that, a write that counts would be answered 503, and a retry of its request found applied
    // elsewhere, uncounted. (Not JetStream's duplicate detection: see ENTRY_ID_HEADER.)
    const headers = natsHeaders();
    headers.set(ENTRY_ID_HEADER, messageId);
    let retried = false;
    for (let attempt = 0; ack === undefined; attempt++) {
      retried = attempt > 0;
      try {
        ack = await this.js.publish(subject, payload, {
          headers,
          expect: { lastSubjectSequence: expectedSeq },
          ...(retried ? { timeout: APPEND_RETRY_TIMEOUT_MS } : {}),
        });
      } catch (error) {
        if (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) {
          // The position may have moved past this append's own first copy (stored, its answer lost; or
          // the same entry appended again): that is this append, not another writer's (seen under a
          // partition: taken for a fence, the request ran again elsewhere and its event was in the
          // history twice).
          const own = await this.ownEntryAfter(orgId, machine, name, expectedSeq, messageId);
          if (own === undefined || (own === 'unknown' && !retried)) throw new LogFencedError(subject, expectedSeq);
          if (own === 'unknown')
            throw uncertain(
              `the cluster's log moved past this write's position and could not tell whether by this write; it may or may not have been applied: read the instance, then retry`,
            );
          return { seq: own, duplicate: true };
        }
        const reason = error instanceof Error ? error.message : String(error);
        // A commit over the nats-server's max_payload (1 MB by default; cluster/README.md) never fits: no retry helps.
        if (/max_payload|maximum payload/i.test(reason)) {
          throw payloadTooLarge(
            `this commit (${typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length} bytes: the instance's head with its context, and the history records of this event) is larger than the cluster's log takes in one message (the nats-server's max_payload): keep contexts smaller`,
          );
        }
        // JetStream without a leader for the stream (a server lost, an election), or no answer in time.
        if (attempt >= APPEND_RETRIES)
          throw uncertain(
            `the cluster's log did not take the write (${reason}); it may or may not have been stored: read the instance, then retry`,
          );
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
    // (an acknowledgement that does not place it past the position named is not one to go by)
    if (ack.seq <= expectedSeq)
      throw uncertain(
        `the cluster's log acknowledged the write at sequence ${ack.seq}, not after ${expectedSeq}; it may or may not have been stored: read the instance, then retry`,
      );
    if (ack.seq !== expectedSeq + 1) {
      // (the writer's own copy of the instance's partition can tell, without asking the log; after a
      // retry, an entry that does not count may be a second copy of this append behind its first)
      const here = await countsHere?.(ack.seq);
      if (here === true) return { seq: ack.seq, duplicate: false };
      if (here === false && !retried) throw new LogFencedError(subject, expectedSeq);
      let first: StoredMsg | null;
      try {
        first = await this.entryAfter(orgId, machine, name, expectedSeq);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw uncertain(
          `the cluster's log took the write but could not tell whether another one came first (${reason}); it may or may not have been applied: read the instance, then retry`,
        );
      }
      if (first?.seq === ack.seq) return { seq: ack.seq, duplicate: false };
      // This append's first copy, stored before the retry's: it is the one that counts.
      if (retried && first && entryIdOf(first.header) === messageId) return { seq: first.seq, duplicate: true };
      // Stored after another entry that named the same position: it changes nothing (a stale entry).
      throw new LogFencedError(subject, expectedSeq);
    }
    return { seq: ack.seq, duplicate: false };
  }

  /**
   * Why this node cannot append now, or undefined when it can: the stream's info must come back within
   * `ms` and, on a replicated stream, name a leader (a server cut off from the majority of its cluster
   * answers neither). What GET /health goes by, so a balancer stops sending to a node that cannot commit.
   */
  async unwritable(ms: number): Promise<string | undefined> {
    const reason = await this.whyUnwritable(ms);
    this.noteWritable(reason === undefined);
    return reason;
  }

  private async whyUnwritable(ms: number): Promise<string | undefined> {
    try {
      const info = (await withinMs(this.jsm.streams.info(this.stream), ms, () => new Error(`no answer in ${ms} ms`))) as StreamInfo;
      return this.leaderProblem(info) ?? (await this.readProblem(info, ms));
    } catch (error) {
      return `the cluster's log (${this.stream}) does not answer: ${errorText(error)}`;
    }
  }

  private leaderProblem(info: StreamInfo): string | undefined {
    const replicas = info.config.num_replicas;
    if (replicas <= 1) return undefined;
    if (!info.cluster?.leader) return `the cluster's log (${this.stream}) has no leader`;
    // A leader cut off from its followers goes on naming itself leader for 10-20 s (a 2.9 server checks
    // its quorum every 10 s) while nothing it is given commits: it must have heard from a majority lately.
    const heard = (info.cluster.replicas ?? []).filter(
      (replica) => replica.current && !replica.offline && replica.active < FOLLOWER_SILENCE_NS,
    ).length;
    if (1 + heard < Math.floor(replicas / 2) + 1)
      return `the cluster's log (${this.stream}) has a leader that has not heard from a majority of its ${replicas} replicas lately`;
    return undefined;
  }

  /**
   * The log must be readable too: an owner reads an instance's last entry before it serves it again
   * (ensureCurrent). A 2.9 server answers a stream's info from its leader but refuses to get a message
   * while the JetStream cluster has no meta leader ("JetStream system temporarily unavailable"), which
   * after a partition healed lasted 4 to 31 s in a probe: writes through every node failed meanwhile,
   * while the info looked healthy. (A sequence the stream does not hold is answered 404: readable.)
   */
  private async readProblem(info: StreamInfo, ms: number): Promise<string | undefined> {
    try {
      // (the get is asked again a while as a server answers "temporarily unavailable" ahead of the leader)
      const within = ms + ASKED_AGAIN_FOR_MS;
      await withinMs(this.get(Math.max(1, info.state.last_seq)), within, () => new Error(`no answer in ${within} ms`));
      return undefined;
    } catch (error) {
      return `the cluster's log (${this.stream}) cannot be read now (${errorText(error)})`;
    }
  }

  /**
   * The stream sequence of the instance's first entry after stream sequence `after`, 0 when it has none:
   * an entry at `seq` that names `after` counts exactly when this is `seq`.
   */
  async firstAfter(orgId: string, machine: string, name: string, after: number): Promise<number> {
    return (await this.entryAfter(orgId, machine, name, after))?.seq ?? 0;
  }

  /**
   * The message id of the instance's first entry after `after`, asked until the log has one or
   * UNCERTAIN_ASKED_FOR_MS have passed (undefined then): less often as time passes, only while the log
   * takes writes (a node cut off from NATS would pile its questions up for the heal, as
   * lastSeqOfPartition says), and once for all the appends that wait on the same position.
   */
  private firstIdAfter(orgId: string, machine: string, name: string, after: number): Promise<string | undefined> {
    const key = `${this.subjectOf(orgId, machine, name)} ${after}`;
    let asked = this.firstIdsAsked.get(key);
    if (asked) return asked;
    asked = (async () => {
      const until = Date.now() + UNCERTAIN_ASKED_FOR_MS;
      for (let round = 0; Date.now() < until; round++) {
        const wait = Math.min(UNCERTAIN_ASKED_EVERY_MS * 2 ** round, UNCERTAIN_ASKED_EVERY_MAX_MS, Math.max(0, until - Date.now()));
        await new Promise((resolve) => setTimeout(resolve, wait).unref());
        if (!this.writable) await this.writableAgain(until).promise;
        const first = await this.entryAfter(orgId, machine, name, after).catch(() => null);
        if (first) return entryIdOf(first.header);
      }
      return undefined;
    })().finally(() => this.firstIdsAsked.delete(key));
    this.firstIdsAsked.set(key, asked);
    return asked;
  }

  /**
   * Resolves when the log is found taking writes again (noteWritable), or at `atMs` when given; `cancel`
   * lets go of the wait (its waiter and timer) when it is no longer wanted.
   */
  private writableAgain(atMs?: number): { promise: Promise<void>; cancel: () => void } {
    let cancel = (): void => undefined;
    const promise = new Promise<void>((resolve) => {
      const timer = atMs === undefined ? undefined : setTimeout(() => cancel(), Math.max(0, atMs - Date.now())).unref();
      cancel = () => {
        clearTimeout(timer);
        this.writableWaiters.delete(cancel);
        resolve();
      };
      this.writableWaiters.add(cancel);
    });
    return { promise, cancel };
  }

  /** The instance's first entry after stream sequence `after` as the stream's leader holds it, null when it has none. */
  async nextEntry(orgId: string, machine: string, name: string, after: number): Promise<FollowedMessage | null> {
    const message = await this.entryAfter(orgId, machine, name, after);
    return message && { seq: message.seq, subject: message.subject, headers: message.header, json: <T>() => message.json<T>() };
  }

  /** The instance's first entry after stream sequence `after`, null when it has none. */
  private entryAfter(orgId: string, machine: string, name: string, after: number): Promise<StoredMsg | null> {
    return firstMessageFrom(this.jsm, this.stream, after + 1, this.subjectOf(orgId, machine, name));
  }

  /**
   * The stream sequence of the instance's first entry after `after` when it carries `messageId` (an
   * append's own copy), undefined when it is another's, 'unknown' when the log cannot tell now.
   */
  private async ownEntryAfter(
    orgId: string,
    machine: string,
    name: string,
    after: number,
    messageId: string,
  ): Promise<number | undefined | 'unknown'> {
    const message = await this.entryAfter(orgId, machine, name, after).catch(() => 'unknown' as const);
    if (message === 'unknown') return message;
    return message && entryIdOf(message.header) === messageId ? message.seq : undefined;
  }

  /** The stream sequence of the instance's last commit, 0 when it has none (what a new owner appends after). */
  async lastSeq(orgId: string, machine: string, name: string): Promise<number> {
    return (await this.lastEntry(orgId, machine, name))?.seq ?? 0;
  }

  /** The instance's last entry as the stream's leader holds it, null when it has none. */
  async lastEntry(orgId: string, machine: string, name: string): Promise<FollowedMessage | null> {
    try {
      const message = await leaderMessage(this.jsm, this.stream, { last_by_subj: this.subjectOf(orgId, machine, name) });
      return message && { seq: message.seq, subject: message.subject, headers: message.header, json: <T>() => message.json<T>() };
    } catch (error) {
      if (error instanceof JetStreamApiError && error.status === 404) return null;
      throw error;
    }
  }

  /**
   * The instances of a partition that have entries in the log, with how many, as the stream's leader
   * tells them (its subjects; a deleted instance's stay, ending in its delete entry). One question, paged by the client,
   * that makes the server look through the partition's subjects: for audits, not for every request.
   */
  async instancesOf(partition: number): Promise<Array<{ orgId: string; machine: string; name: string; entries: number }>> {
    const info = await this.jsm.streams.info(this.stream, { subjects_filter: this.partitionSubject(partition) });
    return Object.entries(info.state.subjects ?? {}).map(([subject, entries]) => {
      const tokens = subject.split('.');
      return {
        orgId: tokens[tokens.length - 3] ?? '',
        machine: tokens[tokens.length - 2] ?? '',
        name: tokens[tokens.length - 1] ?? '',
        entries,
      };
    });
  }

  /**
   * The entry at a stream sequence as the stream's leader holds it (not a direct get, which any replica
   * answers), or undefined when the stream has none there.
   */
  async get(seq: number): Promise<FollowedMessage | undefined> {
    try {
      const message = await leaderMessage(this.jsm, this.stream, { seq });
      return message
        ? { seq: message.seq, subject: message.subject, headers: message.header, json: <T>() => message.json<T>() }
        : undefined;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.status === 404) return undefined;
      throw error;
    }
  }
}

/** The stream's description names its partition count: every node reads it, so all divide alike. */
const describe = (partitions: number): string => `Statehold instance commits; partitions=${partitions}`;

const partitionsOf = (description: string | undefined): number | undefined => {
  const found = /partitions=(\d+)/.exec(description ?? '');
  const count = found ? Number(found[1]) : Number.NaN;
  return Number.isInteger(count) && count >= 1 && count <= MAX_PARTITIONS ? count : undefined;
};

/** Resolves once the stream names a leader (at once on one replica), or after `ms`. */
const leaderElected = async (jsm: JetStreamManager, stream: string, info: StreamInfo, ms: number): Promise<void> => {
  const deadline = Date.now() + ms;
  while (info.config.num_replicas > 1 && !info.cluster?.leader && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    info = await jsm.streams.info(stream).catch(() => info);
  }
};

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));
