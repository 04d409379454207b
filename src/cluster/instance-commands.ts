import { Packr } from 'msgpackr';
import type { ErrorCode } from '../domain/errors.js';
import { countWithinBytes } from '../domain/within-bytes.js';
import type { IndexPosition } from '../domain/index-values.js';
import type { CreateRequest } from '../domain/instance-requests.js';
import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import type { InstanceSummary, InstanceView } from '../store/instance-reads.js';
import type { IndexQuery, InstanceHead, InstanceStatus, OutboxMessage, TransitionRecord } from '../store/instance-store.js';

/**
 * The instance-command contract: what the API asks of an instance's owner (InstanceWrites), what an
 * owner runs (OwnerSide: the node's InstanceRuntime), and the commands and answers a cluster node
 * forwards to another over NATS (cluster/forwarder.ts): one set of operations, written once. On the
 * wire each command is one MessagePack frame with its named fields and the protocol version, checked
 * by its op's validator; each answer likewise (design.md §6.2, "the forward hop"). What users and
 * machines made (events, contexts, auth contexts, messages, index queries, answers' values) travels in
 * those frames as JSON text: MessagePack does not carry every JSON value (msgpackr's decode renames an
 * own key `__proto__`; a lone surrogate, valid in a JSON string, comes back as U+FFFD), and an
 * instance must show the same context through any node.
 */

/**
 * What a create, a read and a send answer: the parts of the head the API shows (api/state-view.ts:
 * state, public context, tags, done, ts; an HTTP API's handler gets state, context and done). Not the
 * snapshot, timers, children, index values or log position, which only the owner needs.
 */
export type InstanceState = Pick<InstanceHead, 'state' | 'context' | 'tags' | 'done' | 'ts'>;

export const stateOf = (head: InstanceState): InstanceState => ({
  state: head.state,
  context: head.context,
  tags: head.tags,
  done: head.done,
  ts: head.ts,
});

/**
 * What the API asks of an instance's owner: the writes, and the read that runs its authorizer against
 * the committed state. The embedded node's InstanceRuntime is it; a cluster node's forwarder is too,
 * and runs each one on the instance's owner, wherever that is (design.md §6.1).
 */
export interface InstanceWrites {
  create(request: CreateRequest): Promise<InstanceState>;
  read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceState>;
  send(orgId: string, machine: string, name: string, event: MachineEvent, authContext: JsonObject): Promise<InstanceState>;
  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void>;
  /** Records the version the instance is to be upgraded to; 400 no-migration-path when no chain of migrations leads there. */
  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void>;
  delete(orgId: string, machine: string, name: string): Promise<boolean>;
  /** Runs a machine's deletion while no instance of it is being created, on this node or any other. */
  whileDeletingMachine<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T>;
}

/** What an owner runs for a command (the node's InstanceRuntime, seen from the forwarder). */
export interface OwnerSide extends InstanceWrites {
  /** `requestId`: applied once (a retry finds it in the history); `retry`: asked again after a lost answer. */
  send(
    orgId: string,
    machine: string,
    name: string,
    event: MachineEvent,
    authContext: JsonObject,
    requestId?: string,
    retry?: boolean,
  ): Promise<InstanceState>;
  fireTimers(orgId: string, machine: string, name: string): Promise<string>;
  receive(message: OutboxMessage): Promise<void>;
  /** Closes (true) or opens a machine's create gate on this node, for a deletion another node runs. */
  gateMachine(orgId: string, machine: string, closed: boolean): void;
}

/**
 * The version of the commands' and answers' frames; a frame of another version gets one error reply.
 * 2: user values as JSON text (1 had them as MessagePack maps).
 */
export const COMMAND_PROTOCOL = 2;

/** Names one instance; `retry`: asked again after a lost answer (the owner fences a create, send or message first). */
interface Keyed {
  orgId: string;
  machine: string;
  name: string;
  retry?: boolean;
}

/** The commands that one instance's owner runs. */
export type InstanceCommand =
  | (Keyed & { op: 'create'; versionId: string; context: JsonObject; authContext: JsonObject; requestId: string })
  | (Keyed & { op: 'read'; authContext: JsonObject })
  | (Keyed & { op: 'send'; event: MachineEvent; authContext: JsonObject; requestId: string })
  | (Keyed & { op: 'setStatus'; status: InstanceStatus })
  | (Keyed & { op: 'setTargetVersion'; targetVersionId: string })
  | (Keyed & { op: 'delete' })
  | (Keyed & { op: 'fireTimers' })
  | (Keyed & { op: 'head' })
  | (Keyed & { op: 'history'; afterSeq: number; limit: number })
  /** A message between instances, delivered on the receiver's owner (its key: orgId, to.machine, to.name). */
  | { op: 'receive'; message: OutboxMessage; retry?: boolean };

/** The commands answered by whichever node they are sent to, not by an instance's owner. */
export type NodeCommand =
  /** Closes (true) or opens a machine's create gate on the node asked. */
  | { op: 'gateMachine'; orgId: string; machine: string; closed: boolean }
  /** The asked node's part of a list, of the partitions named (the forwarder gathers the parts). */
  | { op: 'listPart'; partitions: number[]; orgId: string; machine: string; afterName?: string; limit: number }
  | { op: 'queryPart'; partitions: number[]; query: IndexQuery };

export type Command = InstanceCommand | NodeCommand;
export type CommandOp = Command['op'];

/** What each command answers. */
export interface Answers {
  create: InstanceState;
  read: InstanceState;
  send: InstanceState;
  setStatus: null;
  setTargetVersion: null;
  delete: boolean;
  /** How the firing went (runtime/timer-firing.ts TimerFiring). */
  fireTimers: string;
  receive: null;
  head: InstanceView | null;
  history: TransitionRecord[];
  gateMachine: null;
  listPart: InstanceSummary[];
  queryPart: IndexPosition[];
}

export type AnswerOf<C extends Command> = Answers[C['op']];

export interface ErrorAnswer {
  status: number;
  code: ErrorCode;
  message: string;
  parameter?: string;
}

/** A node's reply to a command. */
export type Reply<C extends Command = Command> =
  /**
   * `whole`: a history part its owner cut nothing from (all it read fits in one message), so its asker
   * need not ask on after it; absent from owners of earlier releases, whose askers ignore it.
   */
  | { ok: true; value: AnswerOf<C>; whole?: true }
  | { ok: false; error: ErrorAnswer }
  /** The node asked does not own the instance or partitions (its view changed), or is gone: nothing ran; ask the owner again. */
  | { ok: false; moved: true };

/** The instance a command is about: [orgId, machine, name]. */
export const keyOf = (command: InstanceCommand): [string, string, string] =>
  command.op === 'receive'
    ? [command.message.orgId, command.message.to.machine, command.message.to.name]
    : [command.orgId, command.machine, command.name];

/** The id that makes a command idempotent: a create's or send's request id, a message's id. */
export const requestIdOf = (command: InstanceCommand): string | undefined =>
  command.op === 'create' || command.op === 'send' ? command.requestId : command.op === 'receive' ? command.message.id : undefined;

// ---- the frames -----------------------------------------------------------------------------------

/** Plain MessagePack maps (no msgpackr records): any release, or any MessagePack reader, reads the frames. */
const packr = new Packr({ useRecords: false, moreTypes: false });

/** The fields of commands that hold user values, each carried as its JSON text. */
const JSON_FIELDS = ['event', 'context', 'authContext', 'message', 'query'] as const;

/** A command's frame: its fields and `v`, the protocol version; user values as JSON text. */
export const encodeCommand = (command: Command): Uint8Array => {
  const frame: Fields = { v: COMMAND_PROTOCOL, ...command };
  for (const field of JSON_FIELDS) if (frame[field] !== undefined) frame[field] = JSON.stringify(frame[field]);
  return packr.pack(frame);
};

/**
 * A reply's frame: `{v, ok, value}` (the value's JSON text; nothing to answer: `null`; a history part
 * also `whole: true` when it was not cut) or `{v, ok: false, error}` (its JSON text: a message may
 * quote machine code's values) or `{v, ok: false, moved: true}`.
 */
/**
 * The first of `records` whose JSON text fits in `bytes` all together, at least one: a history page an
 * owner answers in one NATS message (max_payload) however large each record's event is; its asker
 * asks on from the last one it got (Forwarder.listTransitions).
 */
export const recordsWithin = (records: TransitionRecord[], bytes: number): TransitionRecord[] =>
  records.slice(
    0,
    countWithinBytes(records, bytes, (record) => Buffer.byteLength(JSON.stringify(record)) + 1),
  );

export const encodeReply = (reply: Reply): Uint8Array =>
  packr.pack(
    reply.ok
      ? { v: COMMAND_PROTOCOL, ok: true, value: JSON.stringify(reply.value ?? null), ...(reply.whole ? { whole: true } : {}) }
      : 'error' in reply
        ? { v: COMMAND_PROTOCOL, ok: false, error: JSON.stringify(reply.error) }
        : { v: COMMAND_PROTOCOL, ...reply },
  );

/** The command a frame holds, or why it holds none this node reads. */
export const decodeCommand = (data: Uint8Array): { command: Command } | { problem: string } => {
  const frame = unpacked(data);
  if (frame === undefined) return { problem: 'not a MessagePack frame' };
  if (!isRecord(frame)) return { problem: 'not a map' };
  if (frame.v !== COMMAND_PROTOCOL) return { problem: `protocol version ${String(frame.v)} (this node reads ${COMMAND_PROTOCOL})` };
  const op = frame.op;
  if (typeof op !== 'string' || !Object.prototype.hasOwnProperty.call(commandShapes, op)) return { problem: `no such op ${String(op)}` };
  for (const field of JSON_FIELDS) {
    if (frame[field] === undefined) continue;
    const value = parsed(frame[field]);
    if (value === undefined) return { problem: `${op}: ${field} is not JSON text` };
    frame[field] = value;
  }
  if (!commandShapes[op as CommandOp](frame)) return { problem: `${op}: a field is missing or of the wrong type` };
  delete frame.v;
  return { command: frame as unknown as Command };
};

/** The reply a frame holds, as an answer to `op`; undefined when it is not one this node reads. */
export const decodeReply = <C extends Command>(op: C['op'], data: Uint8Array): Reply<C> | undefined => {
  const frame = unpacked(data);
  if (!isRecord(frame) || frame.v !== COMMAND_PROTOCOL) return undefined;
  if (frame.ok === true) {
    const value = parsed(frame.value);
    if (value === undefined || !answerShapes[op](value)) return undefined;
    return { ok: true, value: value as AnswerOf<C>, ...(frame.whole === true ? { whole: true as const } : {}) };
  }
  if (frame.ok !== false) return undefined;
  if (frame.moved === true) return { ok: false, moved: true };
  const error = parsed(frame.error);
  if (
    !isRecord(error) ||
    !Number.isSafeInteger(error.status) ||
    !isText(error.code) ||
    !isText(error.message) ||
    !(error.parameter === undefined || isText(error.parameter))
  )
    return undefined;
  return {
    ok: false,
    error: {
      status: error.status as number,
      code: error.code as ErrorCode,
      message: error.message,
      ...(error.parameter === undefined ? {} : { parameter: error.parameter }),
    },
  };
};

/** The value a JSON text holds; undefined when it is not JSON text. */
const parsed = (text: unknown): unknown => {
  if (typeof text !== 'string') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};

const unpacked = (data: Uint8Array): unknown => {
  try {
    return packr.unpack(data);
  } catch {
    return undefined;
  }
};

// ---- the validators: one per command, one per answer ----------------------------------------------

type Fields = Record<string, unknown>;

const isText = (value: unknown): value is string => typeof value === 'string';
const isFlag = (value: unknown): value is boolean => typeof value === 'boolean';
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;
/** A plain object (what JSON parses into): not an array, not a Map or a Date. */
const isRecord = (value: unknown): value is Fields => {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
};
const isOptional = <T>(value: unknown, is: (value: unknown) => value is T): boolean => value === undefined || is(value);
const isKeyed = (f: Fields): boolean => isText(f.orgId) && isText(f.machine) && isText(f.name) && isOptional(f.retry, isFlag);
const isEvent = (value: unknown): boolean => isRecord(value) && isText(value.type);
const isInstanceRef = (value: unknown): boolean => isRecord(value) && isText(value.machine) && isText(value.name);
const arePartitions = (value: unknown): boolean => Array.isArray(value) && value.length <= 4_096 && value.every(isCount);
const isIndexPosition = (value: unknown): boolean => isRecord(value) && isText(value.value) && isText(value.name);

const isMessage = (value: unknown): boolean =>
  isRecord(value) &&
  isText(value.id) &&
  isText(value.orgId) &&
  Array.isArray(value.position) &&
  value.position.length === 2 &&
  value.position.every(Number.isFinite) &&
  isInstanceRef(value.from) &&
  isInstanceRef(value.to) &&
  (value.kind === 'send' || value.kind === 'spawn') &&
  isOptional(value.event, isRecord) &&
  isOptional(value.spawn, isRecord) &&
  isOptional(value.fromMadeDepth, isCount);

const isIndexQuery = (value: unknown): boolean =>
  isRecord(value) &&
  isText(value.orgId) &&
  isText(value.machine) &&
  isText(value.index) &&
  isFlag(value.descending) &&
  isCount(value.limit) &&
  (value.filter === undefined || (isRecord(value.filter) && isText(value.filter.op) && isText(value.filter.value))) &&
  (value.after === undefined || isIndexPosition(value.after));

/**
 * Each op's fields, checked where a command enters a node: the types routing and the owner side rely
 * on. What is inside a context, an event or an auth context is the owner side's to check, as for a
 * request that comes in through the API.
 */
const commandShapes: { [Op in CommandOp]: (f: Fields) => boolean } = {
  create: (f) => isKeyed(f) && isText(f.versionId) && isRecord(f.context) && isRecord(f.authContext) && isText(f.requestId),
  read: (f) => isKeyed(f) && isRecord(f.authContext),
  send: (f) => isKeyed(f) && isEvent(f.event) && isRecord(f.authContext) && isText(f.requestId),
  setStatus: (f) => isKeyed(f) && (f.status === 'running' || f.status === 'paused'),
  setTargetVersion: (f) => isKeyed(f) && isText(f.targetVersionId),
  delete: isKeyed,
  fireTimers: isKeyed,
  head: isKeyed,
  history: (f) => isKeyed(f) && isCount(f.afterSeq) && isCount(f.limit),
  receive: (f) => isMessage(f.message) && isOptional(f.retry, isFlag),
  gateMachine: (f) => isText(f.orgId) && isText(f.machine) && isFlag(f.closed),
  listPart: (f) =>
    arePartitions(f.partitions) && isText(f.orgId) && isText(f.machine) && isOptional(f.afterName, isText) && isCount(f.limit),
  queryPart: (f) => arePartitions(f.partitions) && isIndexQuery(f.query),
};

const isState = (value: unknown): boolean =>
  isRecord(value) &&
  (isText(value.state) || isRecord(value.state)) &&
  isRecord(value.context) &&
  Array.isArray(value.tags) &&
  isFlag(value.done) &&
  Number.isFinite(value.ts);
const isNil = (value: unknown): boolean => value === null;
const isList = (value: unknown): boolean => Array.isArray(value);

/** Each op's answer, checked where it comes back: its top-level shape. */
const answerShapes: { [Op in CommandOp]: (value: unknown) => boolean } = {
  create: isState,
  read: isState,
  send: isState,
  setStatus: isNil,
  setTargetVersion: isNil,
  delete: isFlag,
  fireTimers: isText,
  receive: isNil,
  head: (value) => value === null || (isRecord(value) && isText(value.name) && Number.isSafeInteger(value.seq)),
  history: isList,
  gateMachine: isNil,
  listPart: isList,
  queryPart: isList,
};
