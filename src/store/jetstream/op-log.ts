import {
  DiscardPolicy,
  jetstream,
  type JetStreamClient,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { randomUUID } from 'node:crypto';
import { payloadTooLarge, unavailable } from '../../domain/errors.js';
import { StreamFollower } from './stream-follower.js';
import { openingManager } from './stream-opening.js';

interface OpLogOptions {
  cluster: string;
  /** The log's name within the cluster (`META`): its stream is `STATEHOLD_<cluster>_<name>`. */
  name: string;
  replicas: number;
  /** The first stream sequence this node has not applied yet (1 for an empty local copy). */
  from: number;
  /** How long the stream keeps an operation (0, the default: for ever, as a replicated state machine's log must). */
  maxAgeMs?: number;
}

/** Applies one operation to this node's local copy; its result goes back to the node that submitted it. */
export type ApplyOp<Op> = (op: Op, seq: number) => unknown;

/** An operation as stored: with the process that submitted it. */
interface Envelope<Op> {
  origin: string;
  op: Op;
}

interface Waiter {
  seq: number;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * A replicated state machine on JetStream: every node submits operations to one stream and applies
 * every operation of the stream, in stream order, to its own local copy (its LMDB). A submit resolves
 * once this node applied it, with what applying it returned, so the writer reads its own write; other
 * nodes follow within milliseconds. Operations must be deterministic: ids and timestamps are made by
 * the submitter and travel in the operation.
 */
export class JetStreamOpLog<Op> {
  private applied: number;
  private readonly waiters: Waiter[] = [];
  /** Results of operations this node submitted, by sequence, until their submit collects them. */
  private readonly results = new Map<number, { ok: true; value: unknown } | { ok: false; error: unknown }>();
  private follower: StreamFollower | undefined;
  /** How far each other node says it applied (see setPeers), and submits waiting for them. */
  private peers: { nodeId: string; members: () => readonly string[]; waitMs: number } | undefined;
  private readonly peerSeqs = new Map<string, number>();
  private peerWaiters: Array<{ seq: number; resolve: () => void }> = [];
  private peerSubscription: Subscription | undefined;
  /** Marks this process's operations in the stream, whose results it keeps for their submits. */
  private readonly origin = randomUUID();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly stream: string,
    private readonly subject: string,
    private readonly apply: ApplyOp<Op>,
    from: number,
    private readonly onError: (message: string, error: unknown) => void,
  ) {
    this.applied = from - 1;
  }

  static async open<Op>(
    nc: NatsConnection,
    options: OpLogOptions,
    apply: ApplyOp<Op>,
    onError: (message: string, error: unknown) => void,
  ): Promise<JetStreamOpLog<Op>> {
    const jsm = await jetstreamManager(nc);
    const opening = await openingManager(nc);
    const stream = `STATEHOLD_${options.cluster}_${options.name}`;
    const subject = `statehold.${options.cluster}.${options.name.toLowerCase()}`;
    try {
      await opening.streams.info(stream);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || error.status !== 404) throw error;
      await opening.streams.add({
        name: stream,
        subjects: [subject],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        num_replicas: options.replicas,
        max_age: (options.maxAgeMs ?? 0) * 1_000_000,
        max_msgs: -1,
        max_bytes: -1,
      });
    }
    const log = new JetStreamOpLog<Op>(nc, jetstream(nc), jsm, stream, subject, apply, options.from, onError);
    await log.follow();
    return log;
  }

  /** The last stream sequence applied here. */
  get appliedSeq(): number {
    return this.applied;
  }

  /**
   * From now on, this node says how far it applied after each operation, and submits wait (up to
   * `waitMs`) until every other live member applied them too: a machine created through one node is
   * there on the next, whichever node the client's next request reaches.
   */
  setPeers(peers: { nodeId: string; members: () => readonly string[]; waitMs: number }): void {
    this.peers = peers;
    this.peerSubscription?.unsubscribe();
    this.peerSubscription = this.nc.subscribe(`${this.subject}.applied`, {
      callback: (error, message) => {
        if (error) return;
        try {
          const { node, seq } = message.json<{ node: string; seq: number }>();
          if (typeof node !== 'string' || typeof seq !== 'number') return;
          if (seq > (this.peerSeqs.get(node) ?? 0)) this.peerSeqs.set(node, seq);
          this.peerMoved();
        } catch {
          // (not ours)
        }
      },
    });
    this.announceApplied();
  }

  /**
   * Publishes an operation and resolves, once this node applied it (and, with peers set and unless
   * `everywhere` is false, every other live member too, within their wait), with what applying it returned.
   * (No JetStream message id: see log-entries.ts ENTRY_ID_HEADER.)
   */
  async submit(op: Op, options: { everywhere?: boolean } = {}): Promise<unknown> {
    let ack: { seq: number };
    try {
      const payload = JSON.stringify({ origin: this.origin, op } satisfies Envelope<Op>);
      ack = await this.js.publish(this.subject, payload);
    } catch (error) {
      // JetStream without a leader (servers lost, an election) or no answer in time: a 503, not a 500.
      const reason = error instanceof Error ? error.message : String(error);
      if (/max_payload|maximum payload/i.test(reason))
        throw payloadTooLarge(
          `this change is larger than the cluster's log takes in one message (the nats-server's max_payload): ${reason}`,
        );
      throw unavailable(
        `the cluster's log did not take the change (${reason}); it may or may not have been stored: read it back, then retry`,
      );
    }
    await this.until(ack.seq);
    if (this.peers && options.everywhere !== false) await this.appliedByPeers(ack.seq);
    const result = this.results.get(ack.seq);
    this.results.delete(ack.seq);
    if (!result) return undefined;
    if (!result.ok) throw result.error;
    return result.value;
  }

  /** Resolves once every operation acknowledged before the call is applied here (a read that must not be stale). */
  async catchUp(): Promise<void> {
    const last = (await this.jsm.streams.info(this.stream)).state.last_seq;
    await this.until(last);
  }

  private appliedByPeers(seq: number): Promise<void> {
    if (this.peersReached(seq)) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.peerWaiters = this.peerWaiters.filter((waiter) => waiter.resolve !== done);
        resolve();
      }, this.peers?.waitMs ?? 0);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.peerWaiters.push({ seq, resolve: done });
    });
  }

  private peersReached(seq: number): boolean {
    const peers = this.peers;
    if (!peers) return true;
    return peers.members().every((member) => member === peers.nodeId || (this.peerSeqs.get(member) ?? 0) >= seq);
  }

  private peerMoved(): void {
    if (this.peerWaiters.length === 0) return;
    const still: typeof this.peerWaiters = [];
    for (const waiter of this.peerWaiters) this.peersReached(waiter.seq) ? waiter.resolve() : still.push(waiter);
    this.peerWaiters = still;
  }

  private announceApplied(): void {
    if (!this.peers || this.nc.isClosed()) return;
    try {
      this.nc.publish(`${this.subject}.applied`, JSON.stringify({ node: this.peers.nodeId, seq: this.applied }));
    } catch {
      // (closing)
    }
  }

  async close(): Promise<void> {
    this.peerSubscription?.unsubscribe();
    for (const waiter of this.peerWaiters.splice(0)) waiter.resolve();
    await this.follower?.stop();
    for (const waiter of this.waiters.splice(0)) waiter.reject(new Error('the operation log was closed'));
  }

  private until(seq: number): Promise<void> {
    if (this.applied >= seq) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ seq, resolve: () => resolve(), reject });
      this.waiters.sort((a, b) => a.seq - b.seq);
    });
  }

  /** Follows the stream from the first unapplied sequence, again after any interruption (StreamFollower). */
  private async follow(): Promise<void> {
    this.follower = new StreamFollower({
      js: this.js,
      stream: this.stream,
      next: () => this.applied + 1,
      handle: async (message) => {
        let result: { ok: true; value: unknown } | { ok: false; error: unknown };
        let envelope: Envelope<Op> | undefined;
        try {
          envelope = message.json<Envelope<Op>>();
          result = { ok: true, value: await this.apply(envelope.op, message.seq) };
        } catch (error) {
          // Deterministic failures fail the same way on every node: the submitter gets the error.
          result = { ok: false, error };
        }
        this.applied = message.seq;
        this.announceApplied();
        // (kept even when its submit has not started waiting yet: the ack may come after the message)
        if (envelope?.origin === this.origin) this.results.set(message.seq, result);
        while (this.waiters.length > 0 && (this.waiters[0] as Waiter).seq <= this.applied)
          (this.waiters.shift() as Waiter).resolve(undefined);
      },
      onError: this.onError,
    });
    await this.follower.start();
  }
}
