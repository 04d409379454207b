import { randomUUID } from 'node:crypto';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { ServiceError, unavailable } from '../domain/errors.js';
import type { CreateRequest } from '../domain/instance-requests.js';
import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import { compareIndexPositions, type IndexPosition } from '../domain/index-values.js';
import type { InstanceReads, InstanceSummary, InstanceView } from '../store/instance-reads.js';
import {
  type IndexQuery,
  type InstanceStatus,
  type OutboxMessage,
  RequestMovedError,
  type TransitionRecord,
} from '../store/instance-store.js';
import {
  type AnswerOf,
  type Command,
  decodeCommand,
  decodeReply,
  encodeCommand,
  encodeReply,
  recordsWithin,
  type InstanceCommand,
  type InstanceState,
  type InstanceWrites,
  keyOf,
  type NodeCommand,
  type OwnerSide,
  type Reply,
} from './instance-commands.js';
import { NodeRequests, type Suspicion } from './node-requests.js';
import { OwnerRuns, type OwnerRunsOptions } from './owner-runs.js';

export type { OwnerSide } from './instance-commands.js';

/**
 * What an owner reads for the others from what it holds: one instance's head and history, and its
 * part of a list or an index (the partitions asked for; 'moved' when it does not own and hold them all).
 */
export interface OwnedReads {
  head(orgId: string, machine: string, name: string): InstanceView | undefined;
  history(orgId: string, machine: string, name: string, afterSeq: number, limit: number): TransitionRecord[];
  listPart(
    partitions: number[],
    orgId: string,
    machine: string,
    afterName: string | undefined,
    limit: number,
  ): Promise<InstanceSummary[] | 'moved'>;
  queryPart(partitions: number[], query: IndexQuery): Promise<IndexPosition[] | 'moved'>;
}

/** A reply, or that the node asked took the command and left, or did not answer in time: it may have run; ask again with the same request id. */
type Outcome<C extends Command> = Reply<C> | { ok: false; lost: true } | typeof NOT_LISTENING;

interface ForwarderOptions {
  cluster: string;
  nodeId: string;
  /** The members that own a share, as this node sees them. */
  members: () => readonly string[];
  /** How many partitions instances are divided into, and each one's owner in this node's view. */
  partitions: {
    count: number;
    of: (orgId: string, machine: string, name: string) => number;
    owner: (partition: number) => string | undefined;
  };
  /** What this node answers of what it holds. */
  reads: OwnedReads;
  /** How long to wait for an owner's answer: above the settle budget, which a send may take whole. */
  timeoutMs: number;
  /** How long to keep asking while ownership moves (the owner left, or a view has not caught up). */
  moveWindowMs?: number;
  onError: (message: string, error: unknown) => void;
  /** Told of each request sent to another node: how it ended and how long it took (GET /metrics). */
  onAsked?: (outcome: 'answered' | 'moved' | 'lost', seconds: number) => void;
  /** Told how each create and send through this node ended: undefined when answered, else why it could not reach its owner (GET /health's WriteOutcomes). */
  onWrite?: (failure: string | undefined) => void;
  /**
   * Run on the owner before each instance request (not gateMachine), forwarded or local, with whether it
   * is asked again after a lost answer and its id (a create's or send's request id, a message's id). It
   * may refuse with RequestMovedError (nothing ran: the request is asked of the owner again). It answers
   * whether the request is to be run as one asked again (it may have been applied already: its history
   * is looked in first), which a late copy of a request that another copy was asked again for is too.
   */
  prepare?: OwnerRunsOptions['prepare'];
  /**
   * Asked on the owner when a request found no instance (404) while this node still owns it: whether the
   * instance is there once this node's copy holds its last logged entry (then the request runs again:
   * nothing of it ran). The copy can be behind the log right after a partition was taken (seen under a
   * cut: an event answered 404 was in the history). A 503 when that cannot be told now.
   */
  foundAfterCatchUp?: OwnerRunsOptions['foundAfterCatchUp'];
  /** Told of a node that may be gone: a request found no one listening on its subject, or is slow to be answered (Membership.suspect). */
  suspect?: (nodeId: string, why: Suspicion) => void;
}

/**
 * Runs each instance request on the instance's owner: here when this node owns it, else on the owner
 * through NATS request/reply (`statehold.<cluster>.node.<id>.calls`). The owner checks that it still
 * owns the instance by its own view and says "moved" otherwise; then, and when the owner does not
 * answer because it is gone (no responders), the request is asked again of the owner in the current
 * view, for a few seconds. In neither case did it run, so nothing is applied twice. A request whose
 * owner took it and then left or did not answer in time ("lost") is asked again, marked `retry`, of the
 * owner then: that owner fences it in the instance's log before it looks for it in the history (see
 * `prepare`, LogInstanceStore.fence), so the first owner, if it still runs it, cannot commit it too.
 *
 * Reads go to the owners too: one instance's to its owner; a list or an index query to the owner of
 * every partition, each answering for the partitions it was asked about, merged here in key order.
 */
export class Forwarder implements InstanceWrites, InstanceReads {
  private subscription: Subscription | undefined;
  private readonly requests: NodeRequests;
  private readonly subjects = new Map<string, string>();
  /** The instance commands this node runs as their owner. */
  private readonly owner: OwnerRuns;

  constructor(
    private readonly nc: NatsConnection,
    private readonly local: OwnerSide,
    private readonly options: ForwarderOptions,
  ) {
    this.requests = new NodeRequests(nc, {
      members: () => this.options.members(),
      checkMs: DEPARTURE_CHECK_MS,
      ...(options.suspect ? { suspect: options.suspect, slowMs: SLOW_ANSWER_MS } : {}),
      reconnects: { nodeId: options.nodeId, subject: `statehold.${options.cluster}.reconnected` },
    });
    this.owner = new OwnerRuns(local, {
      owns: (orgId, machine, name) => this.owns(orgId, machine, name),
      reads: options.reads,
      onError: options.onError,
      ...(options.prepare ? { prepare: options.prepare } : {}),
      ...(options.foundAfterCatchUp ? { foundAfterCatchUp: options.foundAfterCatchUp } : {}),
    });
  }

  /**
   * Starts answering the commands other nodes forward to this one. Anything may arrive on the subject
   * (a node of another release, a stray publish): each message costs at most one reply, an error reply
   * when it is not a command this node reads, and never the process.
   */
  start(): void {
    this.subscription = this.nc.subscribe(this.subjectOf(this.options.nodeId), {
      callback: (error, message) => {
        if (error) return;
        // (an empty message asks whether this node is there: see probe)
        if (message.data.length === 0) {
          message.respond(HERE);
          return;
        }
        void this.replyTo(message).then((reply) => {
          try {
            let frame = encodeReply(reply);
            // (an answer NATS would refuse to carry: its asker hears why at once, not after its timeout)
            if (frame.length > this.maxPayload())
              frame = encodeReply(
                this.failed(
                  new ServiceError(500, 'internal', `the answer (${frame.length} bytes) is larger than a message between nodes carries`),
                ),
              );
            message.respond(frame);
          } catch (respondError) {
            this.options.onError('could not answer a forwarded command', respondError);
          }
        });
      },
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = undefined;
  }

  /**
   * Whether node `nodeId` listens on its subject: 'gone' when NATS says no one does (its connection is
   * closed: the process died, or it is cut off from the NATS cluster), 'here' when it answers, 'unknown'
   * when the answer does not come within `ms`.
   */
  async probe(nodeId: string, ms: number): Promise<'here' | 'gone' | 'unknown'> {
    const end = await this.requests.request(nodeId, this.subjectOf(nodeId), NOTHING, ms);
    return 'noResponders' in end ? 'gone' : 'lost' in end ? 'unknown' : 'here';
  }

  /** The owner of an instance in this node's view. */
  ownerOf(orgId: string, machine: string, name: string): string | undefined {
    const { partitions } = this.options;
    return partitions.owner(partitions.of(orgId, machine, name));
  }

  owns(orgId: string, machine: string, name: string): boolean {
    return this.ownerOf(orgId, machine, name) === this.options.nodeId;
  }

  create(request: CreateRequest): Promise<InstanceState> {
    const { orgId, machine, name, versionId, context, authContext } = request;
    return this.observed(
      this.call({
        op: 'create',
        orgId,
        machine,
        name,
        versionId,
        context,
        authContext,
        requestId: request.requestId ?? randomUUID(),
      }),
    );
  }

  read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceState> {
    return this.call({ op: 'read', orgId, machine, name, authContext });
  }

  send(orgId: string, machine: string, name: string, event: MachineEvent, authContext: JsonObject): Promise<InstanceState> {
    // The request id makes a retry after a lost answer safe: the owner applies the event once.
    return this.observed(this.call({ op: 'send', orgId, machine, name, event, authContext, requestId: randomUUID() }));
  }

  /**
   * A write's outcome, told to `onWrite`: answered, or failed on the way to its owner (ForwardingFailure).
   * Nothing else is told: a 4xx is mostly the request's own, a machine's stalling code is its org's
   * problem, not the node's, and a commit that failed is told by the owner's log (observeAppends).
   */
  private observed<T>(write: Promise<T>): Promise<T> {
    const { onWrite } = this.options;
    if (!onWrite) return write;
    return write.then(
      (answer) => (onWrite(undefined), answer),
      (error: unknown) => {
        if (error instanceof ForwardingFailure) onWrite(error.message);
        throw error;
      },
    );
  }

  async setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void> {
    await this.call({ op: 'setStatus', orgId, machine, name, status });
  }

  async setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void> {
    await this.call({ op: 'setTargetVersion', orgId, machine, name, targetVersionId });
  }

  delete(orgId: string, machine: string, name: string): Promise<boolean> {
    return this.call({ op: 'delete', orgId, machine, name });
  }

  fireTimers(orgId: string, machine: string, name: string): Promise<string> {
    return this.call({ op: 'fireTimers', orgId, machine, name });
  }

  /** Delivers a message between instances on the receiver's owner. */
  async receive(message: OutboxMessage): Promise<void> {
    await this.call({ op: 'receive', message });
  }

  async head(orgId: string, machine: string, name: string): Promise<InstanceView | undefined> {
    return (await this.call({ op: 'head', orgId, machine, name })) ?? undefined;
  }

  async listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): Promise<TransitionRecord[]> {
    // (an owner answers at most what one message carries: a page of large records comes in parts)
    const records: TransitionRecord[] = [];
    for (let from = afterSeq; records.length < limit;) {
      const answered = { whole: false };
      const part = await this.call({ op: 'history', orgId, machine, name, afterSeq: from, limit: limit - records.length }, answered);
      records.push(...part);
      const last = part[part.length - 1];
      // (a part its owner cut nothing from ends the page: the history ends there, or the page is full)
      if (last === undefined || answered.whole) break;
      from = last.seq;
    }
    return records;
  }

  /** What NATS carries in one message from this node (its server's max_payload). */
  private maxPayload(): number {
    return this.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  }

  async listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): Promise<InstanceSummary[]> {
    const parts = await this.gather((partitions) => ({
      op: 'listPart' as const,
      partitions,
      orgId,
      machine,
      ...(afterName === undefined ? {} : { afterName }),
      limit,
    }));
    const byName = new Map<string, InstanceSummary>();
    for (const part of parts) for (const item of part) byName.set(item.name, item);
    // (names are slugs, ASCII: `<` is LMDB's key order)
    return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, limit);
  }

  async queryIndex(query: IndexQuery): Promise<IndexPosition[]> {
    const parts = await this.gather((partitions) => ({ op: 'queryPart' as const, partitions, query }));
    const order = query.descending ? (a: IndexPosition, b: IndexPosition) => compareIndexPositions(b, a) : compareIndexPositions;
    return parts.flat().sort(order).slice(0, query.limit);
  }

  async hasInstances(orgId: string, machine: string): Promise<boolean> {
    return (await this.listInstances(orgId, machine, undefined, 1)).length > 0;
  }

  /**
   * Asks the owner of every partition, in this node's view, for its part (each owner once, naming the
   * partitions it is asked for) and resolves with the parts. An owner that does not hold them all now
   * (its view moved) or is gone makes the whole round asked again, of the owners in the view then; one
   * no one listens for from here that stays in the view makes it a 503 after UNREACHABLE_OWNER_MS.
   */
  private async gather<C extends NodeCommand>(commandFor: (partitions: number[]) => C): Promise<AnswerOf<C>[]> {
    const deadline = Date.now() + (this.options.moveWindowMs ?? 5_000);
    let notListeningSince = new Map<string, number>();
    for (let attempt = 0; ; attempt++) {
      const byOwner = new Map<string, number[]>();
      for (let partition = 0; partition < this.options.partitions.count; partition++) {
        const owner = this.options.partitions.owner(partition);
        if (owner === undefined) throw unavailable('this node sees no cluster members');
        const list = byOwner.get(owner);
        if (list) list.push(partition);
        else byOwner.set(owner, [partition]);
      }
      const asked = [...byOwner.keys()];
      const replies = await Promise.all(
        [...byOwner].map(async ([owner, partitions]): Promise<Outcome<C>> => {
          const command = commandFor(partitions);
          if (owner !== this.options.nodeId) return this.ask(owner, command);
          try {
            return await this.answer(command);
          } catch (error) {
            return this.failed(error);
          }
        }),
      );
      const failed = replies.find((reply) => !reply.ok && 'error' in reply);
      if (failed && 'error' in failed) throw errorOf(failed.error);
      const values: AnswerOf<C>[] = [];
      for (const reply of replies) if (reply.ok) values.push(reply.value);
      if (values.length === replies.length) return values;
      // (as for one instance's request: an owner kept in view that no one listens for from here)
      const unheard = new Map<string, number>();
      replies.forEach((reply, i) => {
        const owner = asked[i] as string;
        if ('notListening' in reply) unheard.set(owner, notListeningSince.get(owner) ?? Date.now());
      });
      notListeningSince = unheard;
      for (const [owner, since] of unheard)
        if (Date.now() - since >= UNREACHABLE_OWNER_MS)
          throw unavailable(`node ${owner}, which holds part of what was asked, cannot be reached from this node now; retry`);
      if (Date.now() > deadline) throw unavailable("the cluster's partitions keep moving; retry");
      await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, 500)));
    }
  }

  /**
   * A machine's deletion, cluster-wide: every other live node closes its create gate for the machine
   * first (refused while one of them creates an instance of it), then this node runs the deletion
   * behind its own gate, then the others open theirs. A node that cannot be asked makes it a 503.
   */
  async whileDeletingMachine<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T> {
    const others = this.options.members().filter((id) => id !== this.options.nodeId);
    const closed: string[] = [];
    const gate = async (nodeId: string, close: boolean): Promise<void> => {
      const reply = await this.ask(nodeId, { op: 'gateMachine', orgId, machine, closed: close });
      if (reply.ok) return;
      if ('error' in reply) throw errorOf(reply.error);
      throw unavailable(`node ${nodeId} did not answer: machine ${machine} cannot be deleted now; retry`);
    };
    try {
      const results = await Promise.allSettled(
        others.map(async (nodeId) => {
          await gate(nodeId, true);
          closed.push(nodeId);
        }),
      );
      const refused = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (refused) throw refused.reason;
      return await this.local.whileDeletingMachine(orgId, machine, work);
    } finally {
      await Promise.allSettled(closed.map((nodeId) => gate(nodeId, false)));
    }
  }

  /** `answered.whole` is set when the answer came whole: run here, or a reply that says so (Reply). */
  private async call<C extends InstanceCommand>(command: C, answered?: { whole: boolean }): Promise<AnswerOf<C>> {
    const [orgId, machine, name] = keyOf(command);
    let deadline = Date.now() + (this.options.moveWindowMs ?? 5_000);
    let lost = 0;
    let notListening: { owner: string; since: number } | undefined;
    for (let attempt = 0; ; attempt++) {
      const owner = this.ownerOf(orgId, machine, name);
      if (owner === undefined) throw new ForwardingFailure('this node sees no cluster members');
      let reply: Outcome<C>;
      if (owner === this.options.nodeId) {
        try {
          const answer = await this.owner.run(command);
          if (answered) answered.whole = true;
          return answer;
        } catch (error) {
          // (this node turned out not to be the one to run it now: ask again, of the owner in the view then)
          if (!(error instanceof RequestMovedError)) throw lost > 0 ? uncertainOnceLost(error) : error;
          reply = MOVED;
        }
      } else reply = await this.ask(owner, command);
      if (reply.ok) {
        if (answered) answered.whole = reply.whole === true;
        return reply.value;
      }
      if ('error' in reply) throw lost > 0 ? uncertainOnceLost(errorOf(reply.error)) : errorOf(reply.error);
      if ('notListening' in reply) {
        if (notListening?.owner !== owner) notListening = { owner, since: Date.now() };
        else if (Date.now() - notListening.since >= UNREACHABLE_OWNER_MS)
          throw uncertainOnceLost(
            new ForwardingFailure(
              `node ${owner}, the owner of instance ${name} of machine ${machine}, cannot be reached from this node now; retry`,
            ),
            lost,
          );
      }
      if ('lost' in reply) {
        // Asked again with the same request id, of whoever owns the instance now: creates and sends
        // carry an id the owner finds in the instance's history if it did apply them; the other
        // commands come to the same state when repeated.
        if (++lost > MAX_LOST)
          throw new ForwardingFailure(
            `the owner of instance ${name} of machine ${machine} took the request and did not answer; it may or may not have been applied`,
          );
        command = { ...command, retry: true };
        deadline = Date.now() + (this.options.moveWindowMs ?? 5_000);
      }
      if (Date.now() > deadline)
        throw uncertainOnceLost(new ForwardingFailure(`the owner of instance ${name} of machine ${machine} keeps moving; retry`), lost);
      await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, 500)));
    }
  }

  /**
   * One command to a node: its reply; "moved" when no node listens there (nothing ran); "lost" when
   * the node leaves the cluster (as this node sees it) or does not answer in time.
   */
  private async ask<C extends Command>(owner: string, command: C): Promise<Outcome<C>> {
    const startedAt = performance.now();
    const end = await this.requests.request(owner, this.subjectOf(owner), encodeCommand(command), this.options.timeoutMs);
    this.options.onAsked?.('noResponders' in end ? 'moved' : 'lost' in end ? 'lost' : 'answered', (performance.now() - startedAt) / 1000);
    if ('noResponders' in end) return NOT_LISTENING;
    if ('lost' in end) return LOST;
    const reply = decodeReply<C>(command.op, end.answer);
    if (reply) return reply;
    this.options.onError(`a node answered a ${command.op} in a form this node does not read`, owner);
    throw new ServiceError(500, 'internal', 'a node answered in a form this node could not read');
  }

  /** The reply to one message on this node's subject; never rejects (a rejection here would end the node). */
  private async replyTo(message: Msg): Promise<Reply> {
    const decoded = decodeCommand(message.data);
    if ('problem' in decoded) {
      this.options.onError(
        `a forwarded command was not one this node reads: ${decoded.problem}`,
        Buffer.from(message.data.subarray(0, 200)).toString('hex'),
      );
      return UNREADABLE_COMMAND;
    }
    try {
      return await this.answer(decoded.command);
    } catch (error) {
      return this.failed(error);
    }
  }

  private async answer<C extends Command>(command: C): Promise<Reply<C>> {
    const value = await this.answerOf(command);
    if (value === MOVED) return MOVED;
    if (command.op === 'history') {
      // (an owner answers at most what one message carries: a page of large records goes in parts)
      const page = value as TransitionRecord[];
      const part = recordsWithin(page, Math.floor(this.maxPayload() * REPLY_SHARE));
      return { ok: true, value: part as AnswerOf<C>, ...(part.length === page.length ? { whole: true as const } : {}) };
    }
    return { ok: true, value: value as AnswerOf<C> };
  }

  private async answerOf<C extends Command>(command: C): Promise<AnswerOf<C> | typeof MOVED>;
  private async answerOf(command: Command): Promise<unknown> {
    switch (command.op) {
      case 'gateMachine':
        this.local.gateMachine(command.orgId, command.machine, command.closed);
        return null;
      case 'listPart': {
        const { partitions, orgId, machine, afterName, limit } = command;
        const part = await this.options.reads.listPart(partitions, orgId, machine, afterName, limit);
        return part === 'moved' ? MOVED : part;
      }
      case 'queryPart': {
        const part = await this.options.reads.queryPart(command.partitions, command.query);
        return part === 'moved' ? MOVED : part;
      }
      default: {
        const [orgId, machine, name] = keyOf(command);
        if (!this.owns(orgId, machine, name)) return MOVED;
        return this.owner.run(command);
      }
    }
  }

  /** A typed error crosses as it is, `parameter` included; anything else is a 500 without its message, logged here. */
  private failed(error: unknown): Reply<never> {
    if (error instanceof RequestMovedError) return MOVED;
    if (error instanceof ServiceError) {
      return {
        ok: false,
        error: {
          status: error.status,
          code: error.code,
          message: error.message,
          ...(error.parameter === undefined ? {} : { parameter: error.parameter }),
        },
      };
    }
    this.options.onError('a forwarded command failed', error);
    return { ok: false, error: { status: 500, code: 'internal', message: 'internal error' } };
  }

  /**
   * Resolves once the commands this node is running as the owner of instances it no longer owns have
   * answered (a hand-over: Membership.handOverWith), or after `maxMs`; true when they all had.
   */
  settleNotOwned(maxMs: number): Promise<boolean> {
    return this.owner.settleNotOwned(maxMs);
  }

  private subjectOf(nodeId: string): string {
    let subject = this.subjects.get(nodeId);
    if (subject === undefined) this.subjects.set(nodeId, (subject = `statehold.${this.options.cluster}.node.${nodeId}.calls`));
    return subject;
  }
}

/** A request this node could not get to its instance's owner (none seen, an owner that keeps moving or does not answer): a 503. */
class ForwardingFailure extends ServiceError {
  constructor(message: string) {
    super(503, 'unavailable', message);
  }
}

/** What an uncertain answer tells the client to do (as the log's own uncertain writes: transition-log.ts). */
const UNCERTAIN = 'it may or may not have been applied: read the instance, then retry';

/**
 * A 503 for a request asked again after a lost answer (`lost` times) is no plain "retry": the first copy
 * may have been applied, and a client that sends it again then applies it twice (a fence whose read of
 * the log timed out as the stream elected a leader, seen under a killed nats-server). It says so.
 */
const uncertainOnceLost = (error: unknown, lost = 1): unknown => {
  if (lost === 0 || !(error instanceof ServiceError) || error.status !== 503 || error.message.includes('may or may not have been applied'))
    return error;
  const reason = error.message.replace(/;\s*retry\.?$/, '');
  return new ForwardingFailure(`${reason}; the request was asked again after its first answer was lost, so ${UNCERTAIN}`);
};

const errorOf = ({
  status,
  code,
  message,
  parameter,
}: {
  status: number;
  code: ServiceError['code'];
  message: string;
  parameter?: string;
}) => new ServiceError(status, code, message, parameter);

/** How often a node waiting on an owner checks that the owner is still in the cluster. */
const DEPARTURE_CHECK_MS = 100;
/** A request unanswered this long makes its node suspected (it may have died with the request in hand): cheap to check, often. */
const SLOW_ANSWER_MS = 200;
/** Requests asked again after a lost answer, at most (each after the owner changed or timed out). */
const MAX_LOST = 3;

/** A probe (an empty message) and the answer to one. */
const NOTHING = new Uint8Array(0);
const HERE = new Uint8Array([1]);

const MOVED = { ok: false, moved: true } as const;
const LOST = { ok: false, lost: true } as const;
/** Nothing ran: no one listens on the owner's subject, as NATS sees it from this node (moved, as far as the caller can tell). */
const NOT_LISTENING = { ok: false, moved: true, notListening: true } as const;

/**
 * How long a request waits for the owner of its instance, in this node's view, that no one listens for
 * from here: a node that died leaves every view well within it (its members check it at once on such a
 * request, membership.ts suspect); one that stays is one another member still hears (a link that fails
 * one way, a cut route between two servers), and the request is a 503 then rather than after the whole
 * move window.
 */
const UNREACHABLE_OWNER_MS = 2_000;

/** NATS's own max_payload, when the server has not said (1 MB). */
const DEFAULT_MAX_PAYLOAD = 1_048_576;
/** The share of it a history page's records may fill (the frame around them, escapes in their JSON). */
const REPLY_SHARE = 0.75;

/** The answer to a message that is not a command: nothing ran (a sender of another release, or not a node at all). */
const UNREADABLE_COMMAND: Reply<never> = {
  ok: false,
  error: { status: 500, code: 'internal', message: 'a node could not read a command forwarded to it' },
};
