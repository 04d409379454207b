import { createHash } from 'node:crypto';
import { stringifyWithKnownField, withJsonField } from '../../domain/json-texts.js';
import type { FollowedMessage } from './stream-follower.js';
import type { CommitEffects, InstanceHead, TransitionRecord } from '../instance-store.js';

/**
 * One entry of an instance as the TX log holds it, and the stream sequence of the instance's entry it
 * follows (`after`: what its append named as JetStream's expected last subject sequence; 0 for the
 * first). `head.logSeq` is left out: it is the message's own sequence. An entry counts only when it is
 * the first of its instance after `after` (see transition-log.ts: a 2.9 server can store appends it
 * should have refused); one that does not changes nothing but the instance's log position, on every copy.
 * Entries written before 2026-11-28 carry no `after`: their message's header says it.
 */
export type LogEntry = LogEntryBody & { after?: number };

export type LogEntryBody =
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

/**
 * The JSON of an entry as the TX log holds it; a head's context is the text the step gave it when
 * there is one (domain/json-texts.ts), not encoded again. The text stays remembered: the writer's local
 * copy commits the same head next (applyOwn), and takes it then.
 */
export const entryText = (entry: LogEntry): string => {
  if (!('head' in entry)) return JSON.stringify(entry);
  const { head, ...others } = entry;
  return withJsonField(JSON.stringify(others), 'head', stringifyWithKnownField(head, 'context', { keep: true }).text);
};

/** JetStream's header for the expected last subject sequence: what entries written before 2026-11-28 say instead of `after`. */
const EXPECTED_HEADER = 'Nats-Expected-Last-Subject-Sequence';

const positionOf = (header: string | undefined): number | undefined => {
  if (header === undefined || header === '') return undefined;
  const value = Number(header);
  return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
};

/** The instance an entry is of. */
export const instanceOf = (entry: LogEntry): Pick<InstanceHead, 'orgId' | 'machine' | 'name'> =>
  entry.kind === 'create' || entry.kind === 'commit' || entry.kind === 'head' ? entry.head : entry;

/** The entry a TX log message holds, with the position it follows (from its header for older entries). */
export const entryOf = (message: FollowedMessage): LogEntry => {
  const entry = message.json<LogEntry>();
  entry.after ??= positionOf(message.headers?.get(EXPECTED_HEADER));
  return entry;
};

/** The instance a TX subject is of: its last three tokens (names are single NATS tokens). */
export const keyOfSubject = (subject: string): string => {
  const tokens = subject.split('.');
  return `${tokens[tokens.length - 3]}/${tokens[tokens.length - 2]}/${tokens[tokens.length - 1]}`;
};

export const keyOf = (head: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>): string => `${head.orgId}/${head.machine}/${head.name}`;

/**
 * The id of an append: the instance, the log position it follows and a hash of the entry. It goes in
 * the message's ENTRY_ID_HEADER, so a retry of the same append (its acknowledgement lost) recognises its
 * own first copy at the position (transition-log.ts); any other entry there, from another node or from a
 * later attempt here, has another id.
 */
export const messageIdOf = (head: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>, payload: string, after = 0): string =>
  `${keyOf(head)}:${after}:${createHash('sha256').update(payload).digest('base64url').slice(0, 22)}`;

/**
 * Where an entry's id is, not JetStream's `Nats-Msg-Id`: with that header a 2.9.10 server's duplicate
 * detection made the replicas of a stream diverge under a cut of its leader's routes (bench/JOURNAL.md,
 * 2026-11-30: thousands of messages at other sequences, acknowledged ones missing from a replica).
 */
export const ENTRY_ID_HEADER = 'Statehold-Entry-Id';

/** The id a TX log message carries (entries written before 2026-11-30 carry it as `Nats-Msg-Id`). */
export const entryIdOf = (headers: { get(key: string): string } | undefined): string =>
  headers?.get(ENTRY_ID_HEADER) || headers?.get('Nats-Msg-Id') || '';

export const withoutLogSeq = (head: InstanceHead): InstanceHead => {
  const { logSeq: _logSeq, ...rest } = head;
  return rest;
};
