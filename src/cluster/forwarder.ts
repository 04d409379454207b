import { randomUUID } from 'node:crypto';
import { type Msg, NoRespondersError, type NatsConnection, RequestError, type Subscription, TimeoutError } from '@nats-io/transport-node';
import { type ErrorCode, ServiceError, unavailable } from '../domain/errors.js';
import type { CreateRequest } from '../domain/instance-requests.js';
import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import { compareIndexPositions, type IndexPosition } from '../domain/index-values.js';
import type { InstanceReads, InstanceSummary } from '../store/instance-reads.js';
import {
  type IndexQuery,
  type InstanceHead,
  type InstanceStatus,
  type OutboxMessage,
  RequestMovedError,
  type TransitionRecord,
} from '../store/instance-store.js';

/** What an owner runs for a request (the node's InstanceRuntime, seen from here). */
export interface OwnerSide {
  create(request: CreateRequest): Promise<InstanceHead>;
  read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceHead>;
  send(
    orgId: string,
    machine: string,
    name: string,
    event: MachineEvent,
    authContext: JsonObject,
    requestId?: string,
    retry?: boolean,
  ): Promise<InstanceHead>;
  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void>;
  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void>;
  delete(orgId: string, machine: string, name: string): Promise<boolean>;
  fireTimers(orgId: string, machine: string, name: string): Promise<unknown>;
  receive(message: OutboxMessage): Promise<void>;
  whileDeletingMachine<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T>;
  gateMachine(orgId: string, machine: string, closed: boolean): void;
}

/**
 * What an owner reads for the others from what it holds: one instance's head and history, and its
 * part of a list or an index (the partitions asked for; 'moved' when it does not own and hold them all).
 */
export interface OwnedReads {
  head(orgId: string, machine: string, name: string): InstanceHead | undefined;
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

/** `retry`: asked again after a lost answer (see call); the owner fences the request before it runs it (ForwarderOptions.prepare). */
type Call = { retry?: boolean } & (
  | { op: 'create'; args: [CreateRequest] }
  | { op: 'read'; args: [string, string, string, JsonObject] }
  /** The last argument: whether this is a retry after a lost answer (only then does the owner look for the id). */
  | { op: 'send'; args: [string, string, string, MachineEvent, JsonObject, string, boolean] }
  | { op: 'setStatus'; args: [string, string, string, InstanceStatus] }
  | { op: 'setTargetVersion'; args: [string, string, string, string] }
  | { op: 'delete'; args: [string, string, string] }
  | { op: 'fireTimers'; args: [string, string, string] }
  | { op: 'receive'; args: [OutboxMessage] }
  | { op: 'head'; args: [string, string, string] }
  | { op: 'history'; args: [string, string, string, number, number] }
  /** Not about one instance: closes (true) or opens a machine's create gate on the node asked. */
  | { op: 'gateMachine'; args: [string, string, boolean] }
  /** Not about one instance: the asked node's part of a list (the partitions named), see gather. */
  | { op: 'listPart'; args: [number[], string, string, string | null, number] }
  | { op: 'queryPart'; args: [number[], IndexQuery] }
);

/** The calls answered by whichever node they are sent to, not by an instance's owner. */
type NodeCall = Extract<Call, { op: 'gateMachine' | 'listPart' | 'queryPart' }>;
type InstanceCall = Exclude<Call, NodeCall>;

type Reply =
  | { ok: true; value: unknown }
  | { ok: false; error: { status: number; code: ErrorCode; message: string; parameter?: string } }
  /** This node does not own the instance (its view changed), or is gone: nothing ran; ask the owner again. */
  | { ok: false; moved: true }
  /** The owner took the request and left, or did not answer in time: it may have run; ask again with the same request id. */
  | { ok: false; lost: true };

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
  /**
   * Run on the owner before each instance request (not gateMachine), forwarded or local, with whether it
   * is asked again after a lost answer and its id (a create's or send's request id, a message's id). It
   * may refuse with RequestMovedError (nothing ran: the request is asked of the owner again).
   */
  prepare?: (orgId: string, machine: string, name: string, request: { retried: boolean; requestId?: string }) => Promise<void>;
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
export class Forwarder implements InstanceReads {
  private subscription: Subscription | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly local: OwnerSide,
    private readonly options: ForwarderOptions,
  ) {}

  /**
   * Starts answering the requests other nodes forward to this one. Anything may arrive on the subject
   * (a node of another release, a stray publish): each message costs at most one reply, an error reply
   * when it is not a call this node reads, and never the process.
   */
  start(): void {
    this.subscription = this.nc.subscribe(this.subjectOf(this.options.nodeId), {
      callback: (error, message) => {
        if (error) return;
        void this.replyTo(message).then((reply) => {
          try {
            message.respond(JSON.stringify(reply));
          } catch (respondError) {
            this.options.onError('could not answer a forwarded call', respondError);
          }
        });
      },
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = undefined;
  }

  /** The owner of an instance in this node's view. */
  ownerOf(orgId: string, machine: string, name: string): string | undefined {
    const { partitions } = this.options;
    return partitions.owner(partitions.of(orgId, machine, name));
  }

  owns(orgId: string, machine: string, name: string): boolean {
    return this.ownerOf(orgId, machine, name) === this.options.nodeId;
  }

  create(request: CreateRequest): Promise<InstanceHead> {
    const call: Call = { op: 'create', args: [{ ...request, requestId: request.requestId ?? randomUUID() }] };
    return this.call(request.orgId, request.machine, request.name, call) as Promise<InstanceHead>;
  }

  read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceHead> {
    return this.call(orgId, machine, name, { op: 'read', args: [orgId, machine, name, authContext] }) as Promise<InstanceHead>;
  }

  send(orgId: string, machine: string, name: string, event: MachineEvent, authContext: JsonObject): Promise<InstanceHead> {
    // The request id makes a retry after a lost answer safe: the owner applies the event once.
    return this.call(orgId, machine, name, {
      op: 'send',
      args: [orgId, machine, name, event, authContext, randomUUID(), false],
    }) as Promise<InstanceHead>;
  }

  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void> {
    return this.call(orgId, machine, name, { op: 'setStatus', args: [orgId, machine, name, status] }) as Promise<void>;
  }

  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void> {
    return this.call(orgId, machine, name, { op: 'setTargetVersion', args: [orgId, machine, name, targetVersionId] }) as Promise<void>;
  }

  delete(orgId: string, machine: string, name: string): Promise<boolean> {
    return this.call(orgId, machine, name, { op: 'delete', args: [orgId, machine, name] }) as Promise<boolean>;
  }

  fireTimers(orgId: string, machine: string, name: string): Promise<unknown> {
    return this.call(orgId, machine, name, { op: 'fireTimers', args: [orgId, machine, name] });
  }

  /** Delivers a message between instances on the receiver's owner. */
  receive(message: OutboxMessage): Promise<void> {
    return this.call(message.orgId, message.to.machine, message.to.name, { op: 'receive', args: [message] }) as Promise<void>;
  }

  async head(orgId: string, machine: string, name: string): Promise<InstanceHead | undefined> {
    return ((await this.call(orgId, machine, name, { op: 'head', args: [orgId, machine, name] })) ?? undefined) as InstanceHead | undefined;
  }

  async listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): Promise<TransitionRecord[]> {
    return (await this.call(orgId, machine, name, { op: 'history', args: [orgId, machine, name, afterSeq, limit] })) as TransitionRecord[];
  }

  async listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): Promise<InstanceSummary[]> {
    const parts = await this.gather<InstanceSummary[]>((partitions) => ({
      op: 'listPart',
      args: [partitions, orgId, machine, afterName ?? null, limit],
    }));
    const byName = new Map<string, InstanceSummary>();
    for (const part of parts) for (const item of part) byName.set(item.name, item);
    // (names are slugs, ASCII: `<` is LMDB's key order)
    return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, limit);
  }

  async queryIndex(query: IndexQuery): Promise<IndexPosition[]> {
    const parts = await this.gather<IndexPosition[]>((partitions) => ({ op: 'queryPart', args: [partitions, query] }));
    const order = query.descending ? (a: IndexPosition, b: IndexPosition) => compareIndexPositions(b, a) : compareIndexPositions;
    return parts.flat().sort(order).slice(0, query.limit);
  }

  async hasInstances(orgId: string, machine: string): Promise<boolean> {
    return (await this.listInstances(orgId, machine, undefined, 1)).length > 0;
  }

  /**
   * Asks the owner of every partition, in this node's view, for its part (each owner once, naming the
   * partitions it is asked for) and resolves with the parts. An owner that does not hold them all now
   * (its view moved) or is gone makes the whole round asked again, of the owners in the view then.
   */
  private async gather<T>(callFor: (partitions: number[]) => NodeCall): Promise<T[]> {
    const deadline = Date.now() + (this.options.moveWindowMs ?? 5_000);
    for (let attempt = 0; ; attempt++) {
      const byOwner = new Map<string, number[]>();
      for (let partition = 0; partition < this.options.partitions.count; partition++) {
        const owner = this.options.partitions.owner(partition);
        if (owner === undefined) throw unavailable('this node sees no cluster members');
        const list = byOwner.get(owner);
        if (list) list.push(partition);
        else byOwner.set(owner, [partition]);
      }
      const replies = await Promise.all(
        [...byOwner].map(async ([owner, partitions]): Promise<Reply> => {
          const call = callFor(partitions);
          if (owner !== this.options.nodeId) return this.ask(owner, call);
          try {
            return await this.answer(call);
          } catch (error) {
            return this.failed(error);
          }
        }),
      );
      const failed = replies.find((reply) => !reply.ok && 'error' in reply);
      if (failed && 'error' in failed) {
        const { status, code, message, parameter } = failed.error;
        throw new ServiceError(status, code, message, parameter);
      }
      if (replies.every((reply) => reply.ok)) return replies.map((reply) => (reply as { value: T }).value);
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
      const reply = await this.ask(nodeId, { op: 'gateMachine', args: [orgId, machine, close] });
      if (reply.ok) return;
      if ('error' in reply) throw new ServiceError(reply.error.status, reply.error.code, reply.error.message, reply.error.parameter);
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

  private async call(orgId: string, machine: string, name: string, call: InstanceCall): Promise<unknown> {
    let deadline = Date.now() + (this.options.moveWindowMs ?? 5_000);
    let lost = 0;
    for (let attempt = 0; ; attempt++) {
      const owner = this.ownerOf(orgId, machine, name);
      if (owner === undefined) throw unavailable('this node sees no cluster members');
      let reply: Reply;
      if (owner === this.options.nodeId) {
        try {
          return await this.runLocally(call);
        } catch (error) {
          // (this node turned out not to be the one to run it now: ask again, of the owner in the view then)
          if (!(error instanceof RequestMovedError)) throw error;
          reply = { ok: false, moved: true };
        }
      } else reply = await this.ask(owner, call);
      if (reply.ok) return reply.value;
      if ('error' in reply) {
        const { status, code, message, parameter } = reply.error;
        throw new ServiceError(status, code, message, parameter);
      }
      if ('lost' in reply) {
        // Asked again with the same request id, of whoever owns the instance now: creates and sends
        // carry an id the owner finds in the instance's history if it did apply them; the other calls
        // come to the same state when repeated.
        if (++lost > MAX_LOST)
          throw unavailable(
            `the owner of instance ${name} of machine ${machine} took the request and did not answer; it may or may not have been applied`,
          );
        if (call.op === 'send') call.args[6] = true;
        call.retry = true;
        deadline = Date.now() + (this.options.moveWindowMs ?? 5_000);
      }
      if (Date.now() > deadline) throw unavailable(`the owner of instance ${name} of machine ${machine} keeps moving; retry`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, 500)));
    }
  }

  /**
   * One request to a node: its reply; "moved" when no node listens there (nothing ran); "lost" when
   * the node leaves the cluster (as this node sees it) or does not answer in time.
   */
  private async ask(owner: string, call: Call): Promise<Reply> {
    let watching: NodeJS.Timeout | undefined;
    const departed = new Promise<Reply>((resolve) => {
      watching = setInterval(() => {
        if (!this.options.members().includes(owner)) resolve({ ok: false, lost: true });
      }, DEPARTURE_CHECK_MS);
    });
    const asked = (async (): Promise<Reply> => {
      try {
        const answer = await this.nc.request(this.subjectOf(owner), JSON.stringify(call), { timeout: this.options.timeoutMs });
        return answer.json<Reply>();
      } catch (error) {
        const cause = error instanceof RequestError ? error.cause : error;
        if (
          error instanceof NoRespondersError ||
          cause instanceof NoRespondersError ||
          (error instanceof RequestError && error.isNoResponders())
        )
          return { ok: false, moved: true };
        if (error instanceof TimeoutError || cause instanceof TimeoutError) return { ok: false, lost: true };
        throw error;
      }
    })();
    try {
      return await Promise.race([asked, departed]);
    } finally {
      clearInterval(watching);
    }
  }

  /** The reply to one message on this node's subject; never rejects (a rejection here would end the node). */
  private async replyTo(message: Msg): Promise<Reply> {
    let call: Call | undefined;
    try {
      call = callOf(message.json<unknown>());
    } catch (parseError) {
      this.options.onError('a forwarded call was not JSON', parseError);
      return UNREADABLE_CALL;
    }
    if (call === undefined) {
      this.options.onError('a forwarded call was not one this node reads', message.string().slice(0, 200));
      return UNREADABLE_CALL;
    }
    try {
      return await this.answer(call);
    } catch (error) {
      return this.failed(error);
    }
  }

  private async answer(call: Call): Promise<Reply> {
    switch (call.op) {
      case 'gateMachine':
        this.local.gateMachine(...call.args);
        return { ok: true, value: null };
      case 'listPart': {
        const [partitions, orgId, machine, after, limit] = call.args;
        const part = await this.options.reads.listPart(partitions, orgId, machine, after ?? undefined, limit);
        return part === 'moved' ? { ok: false, moved: true } : { ok: true, value: part };
      }
      case 'queryPart': {
        const part = await this.options.reads.queryPart(...call.args);
        return part === 'moved' ? { ok: false, moved: true } : { ok: true, value: part };
      }
      default:
        break;
    }
    const [orgId, machine, name] = keyOfCall(call);
    if (!this.owns(orgId, machine, name)) return { ok: false, moved: true };
    return { ok: true, value: (await this.runLocally(call)) ?? null };
  }

  /** A typed error crosses as it is, `parameter` included; anything else is a 500 without its message, logged here. */
  private failed(error: unknown): Reply {
    if (error instanceof RequestMovedError) return { ok: false, moved: true };
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
    this.options.onError('a forwarded call failed', error);
    return { ok: false, error: { status: 500, code: 'internal', message: 'internal error' } };
  }

  private async runLocally(call: InstanceCall): Promise<unknown> {
    const local = this.local;
    if (this.options.prepare) {
      const [orgId, machine, name] = keyOfCall(call);
      const requestId =
        call.op === 'send'
          ? call.args[5]
          : call.op === 'create'
            ? call.args[0].requestId
            : call.op === 'receive'
              ? call.args[0].id
              : undefined;
      await this.options.prepare(orgId, machine, name, { retried: call.retry === true, ...(requestId === undefined ? {} : { requestId }) });
    }
    switch (call.op) {
      case 'create':
        return local.create(...call.args);
      case 'read':
        return local.read(...call.args);
      case 'send':
        return local.send(...call.args);
      case 'setStatus':
        return local.setStatus(...call.args);
      case 'setTargetVersion':
        return local.setTargetVersion(...call.args);
      case 'delete':
        return local.delete(...call.args);
      case 'fireTimers':
        return local.fireTimers(...call.args);
      case 'receive':
        return local.receive(...call.args);
      case 'head':
        return this.options.reads.head(...call.args) ?? null;
      case 'history':
        return this.options.reads.history(...call.args);
    }
  }

  private subjectOf(nodeId: string): string {
    return `statehold.${this.options.cluster}.node.${nodeId}.calls`;
  }
}

/** How often a node waiting on an owner checks that the owner is still in the cluster. */
const DEPARTURE_CHECK_MS = 100;
/** Requests asked again after a lost answer, at most (each after the owner changed or timed out). */
const MAX_LOST = 3;

/** The answer to a message that is not a call: nothing ran (a sender of another release, or not a node at all). */
const UNREADABLE_CALL: Reply = {
  ok: false,
  error: { status: 500, code: 'internal', message: 'a node could not read a call forwarded to it' },
};

/** The ops whose first three arguments name the instance (orgId, machine, name). */
const KEYED_OPS = new Set(['read', 'send', 'setStatus', 'setTargetVersion', 'delete', 'fireTimers', 'head', 'history']);

const arePartitions = (value: unknown): value is number[] =>
  Array.isArray(value) && value.length <= 4_096 && value.every((item) => Number.isSafeInteger(item) && (item as number) >= 0);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const areStrings = (values: unknown[]): boolean => values.every((value) => typeof value === 'string');

/**
 * The call a message holds, when it has the shape routing needs (op, and the strings that name the
 * instance); undefined otherwise. The arguments' other details are the owner side's to check.
 */
const callOf = (value: unknown): Call | undefined => {
  if (!isObject(value) || typeof value.op !== 'string' || !Array.isArray(value.args)) return undefined;
  const { op, args } = value;
  const first = args[0];
  if (op === 'create') return isObject(first) && areStrings([first.orgId, first.machine, first.name]) ? (value as Call) : undefined;
  if (op === 'receive')
    return isObject(first) && isObject(first.to) && areStrings([first.orgId, first.to.machine, first.to.name])
      ? (value as Call)
      : undefined;
  if (op === 'gateMachine')
    return areStrings(args.slice(0, 2)) && args.length === 3 && typeof args[2] === 'boolean' ? (value as Call) : undefined;
  if (op === 'listPart')
    return arePartitions(first) &&
      areStrings(args.slice(1, 3)) &&
      (args[3] === null || typeof args[3] === 'string') &&
      Number.isSafeInteger(args[4])
      ? (value as Call)
      : undefined;
  if (op === 'queryPart')
    return arePartitions(first) &&
      isObject(args[1]) &&
      areStrings([args[1].orgId, args[1].machine, args[1].index]) &&
      Number.isSafeInteger(args[1].limit)
      ? (value as Call)
      : undefined;
  return KEYED_OPS.has(op) && args.length >= 3 && areStrings(args.slice(0, 3)) ? (value as Call) : undefined;
};

const keyOfCall = (call: InstanceCall): [string, string, string] => {
  switch (call.op) {
    case 'create':
      return [call.args[0].orgId, call.args[0].machine, call.args[0].name];
    case 'receive':
      return [call.args[0].orgId, call.args[0].to.machine, call.args[0].to.name];
    default:
      return [call.args[0], call.args[1], call.args[2]];
  }
};
