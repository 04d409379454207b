/**
 * The pure parts of building a commit: dating its records, what of a step's result the head keeps,
 * the size limits, what the commit is billed. No I/O and no clock of their own (transition-pipeline.ts,
 * instance-creation.ts and instance-upgrader.ts call them with what they have; commit-records.test.ts
 * runs them alone).
 */
import { contextTooLarge, stateTooLarge } from '../domain/errors.js';
import type { StepResult } from '../sandbox/index.js';
import type { InstanceHead, TransitionRecord } from '../store/instance-store.js';

/** Each 100 KB of resulting context counts as one more transition (wire-protocol §8.6). */
const BILLING_CONTEXT_UNIT = 100 * 1024;
/** What one index write counts for, in transitions (wire-protocol §8.6). */
const INDEX_WRITE_TRANSITIONS = 0.5;

/**
 * Dates the records of one commit. Each carries, in `ts`, when its event was applied (so a delayed
 * event that fired 3 s into a settling step is dated then, not at the commit); `ts` is raised where
 * needed to grow strictly per instance, past `after` (its last), even if the clock steps back.
 */
export const stampTimes = (records: TransitionRecord[], after: number): void => {
  let previous = after;
  for (const record of records) {
    record.ts = Math.max(record.ts, previous + 1);
    previous = record.ts;
    record.createdAt = new Date(record.ts).toISOString();
  }
};

/** What the head keeps of a step's result (only delayed events are persisted timers). */
export const headStateOf = (
  result: StepResult,
): Pick<InstanceHead, 'state' | 'context' | 'tags' | 'done' | 'snapshot' | 'pendingTimers'> => ({
  state: result.state,
  context: result.context,
  tags: result.tags,
  done: result.done,
  snapshot: result.snapshot,
  pendingTimers: result.pendingTimers.filter((timer) => timer.kind === 'event'),
});

/** Retry counts are kept only for timers that are still pending. */
export const keptTimerAttempts = (
  attempts: InstanceHead['timerAttempts'],
  pendingTimers: InstanceHead['pendingTimers'],
): InstanceHead['timerAttempts'] =>
  Object.fromEntries(Object.entries(attempts).filter(([id]) => pendingTimers.some((timer) => timer.id === id)));

/**
 * The context limit (400 KiB, wire-protocol §8.3), and a bound on everything else a commit persists
 * (snapshot, pending delayed events with their payloads), which machine code also controls.
 * Returns the context's size and the state's total size (what the actor holds in memory).
 */
export const checkedSize = (
  result: StepResult,
  limits: { maxContextBytes: number; maxPersistedBytes: number },
): { contextBytes: number; stateBytes: number } => {
  // Measured on the JSON texts the harness produced (step-result.ts).
  const { contextBytes, restBytes } = result.sizes;
  if (contextBytes > limits.maxContextBytes) throw contextTooLarge(contextBytes, limits.maxContextBytes);
  if (restBytes > limits.maxPersistedBytes) throw stateTooLarge(restBytes, limits.maxPersistedBytes);
  return { contextBytes, stateBytes: contextBytes + restBytes };
};

/** What a commit is billed, in transitions: its records, its context per 100 KB, half per index write (wire-protocol §8.6). */
export const billedTransitions = (records: number, contextBytes: number, indexWrites: number): number =>
  records + Math.floor(contextBytes / BILLING_CONTEXT_UNIT) + indexWrites * INDEX_WRITE_TRANSITIONS;
