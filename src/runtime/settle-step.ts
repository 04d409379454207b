/**
 * A step settled (wire-protocol §8.1, design.md §4): the settle loop (settle.ts) run on one actor of a
 * sandboxed version, with the delayed events that come due meanwhile fired one after another, each
 * recorded as an event of its own, and, past the budget, the children still running stopped.
 */
import type { Clock } from '../domain/clock.js';
import type { MachineEvent, PendingTimer } from '../domain/machine-state.js';
import { MachineCodeError, SandboxHeldError, SandboxTimeoutError, type StepResult } from '../sandbox/index.js';
import type { TransitionRecord } from '../store/instance-store.js';
import type { InstanceActor } from './instance-actor.js';
import type { LogSink } from './log-sink.js';
import type { VersionSandbox } from './runtime-sandboxes.js';
import { realTime, settle, type SettleTime } from './settle.js';
import type { StepEffects } from './step-effects.js';

export type EventTimer = Extract<PendingTimer, { kind: 'event' }>;

/** Whether a pending timer is a delayed event (not machine code's setTimeout) due by `nowMs`. */
export const dueEvent = (timer: PendingTimer, nowMs: number): timer is EventTimer => timer.kind === 'event' && timer.dueAt <= nowMs;

/**
 * The earliest moment, by `nowMs`, at which delayed events are due and those due then (the ones `skip`
 * says are not passed by), or undefined: what the settle loop and the timers' delivery fire next.
 */
export const earliestDue = (
  timers: PendingTimer[],
  nowMs: number,
  skip: (timer: EventTimer) => boolean = () => false,
): { at: number; due: EventTimer[] } | undefined => {
  const due = timers.filter((timer): timer is EventTimer => dueEvent(timer, nowMs) && !skip(timer));
  if (due.length === 0) return undefined;
  const at = Math.min(...due.map((timer) => timer.dueAt));
  return { at, due: due.filter((timer) => timer.dueAt === at) };
};

/** A delayed event that fired while a step settled, and the state the machine was in when the next came. */
interface FiredTimer {
  event: MachineEvent;
  result: StepResult;
  /** When it was applied (the runtime's clock): the settle loop waits for real until each one is due. */
  appliedAt: number;
}

/** A settled step: its final result, the children stopped at the timeout, the delayed events fired. */
export interface Settled {
  result: StepResult;
  stoppedChildren: string[];
  fired: FiredTimer[];
  /** The state before the first of `fired` (present when one fired). */
  beforeFired?: StepResult;
  /**
   * A delayed event's machine code failed as it fired while settling: the sandbox dropped the actor
   * (rebuilt from this commit next time), and the event stays pending for the durable timers.
   */
  timerFailed?: true;
}

/** A failure of machine code itself (not of the sandbox's worker, nor a stall it was moved aside for). */
const machineFailure = (error: unknown): boolean =>
  error instanceof MachineCodeError || (error instanceof SandboxTimeoutError && !(error instanceof SandboxHeldError));

/** Thrown out of the settle loop when a delayed event's machine code fails as it fires. */
class TimerFailedWhileSettling extends Error {
  constructor(
    readonly event: MachineEvent,
    readonly failure: Error,
  ) {
    super(failure.message);
  }
}

interface SettleContext {
  clock: Clock;
  logs: LogSink;
  settings: { settleBudgetMs: number };
}

export const settleStep = async (
  { clock, logs, settings }: SettleContext,
  actor: InstanceActor,
  sandbox: VersionSandbox,
  first: StepResult,
  startedAt: number,
  effects: StepEffects,
  seqBeforeFirst: number,
): Promise<Settled> => {
  // Delayed events that come due while settling are processed events like any other (interface-spec,
  // Events 2): each gets its own history record. So the clock is advanced to one due time after
  // another, and each record holds the state the machine was in when the next event came.
  const fired: FiredTimer[] = [];
  let beforeFired: StepResult | undefined;
  let latest = first;
  /** The latest time the actor's clock was moved to (never moved back). */
  let advancedTo = startedAt;
  const advance = async (nowMs: number) => {
    advancedTo = Math.max(advancedTo, nowMs);
    // Due times one after another, earliest first, including delayed events that fired ones schedule
    // (bounded: an actor holds at most 1,000 timers). Timers due at the same moment fire together.
    for (let round = 0; round < 1_000; round++) {
      const next = earliestDue(latest.pendingTimers, nowMs);
      if (next === undefined) break;
      const { at, due } = next;
      const before = latest;
      // (a JS timer may wake the loop a hair early; the sandbox is told the due time then)
      const appliedAt = Math.max(clock.now(), at);
      try {
        latest = effects.absorb(await sandbox.advance(actor.key, at));
      } catch (error) {
        if (!machineFailure(error)) throw error;
        throw new TimerFailedWhileSettling((due[0] as EventTimer).event, error as Error);
      }
      const pending = new Set(latest.pendingTimers.map((timer) => timer.id));
      const firedNow = due.filter((timer) => !pending.has(timer.id));
      if (firedNow.length === 0) break;
      const previous = fired.at(-1);
      if (previous) previous.result = before;
      else beforeFired = before;
      for (const timer of firedNow) fired.push({ event: timer.event, result: latest, appliedAt });
    }
    latest = effects.absorb(await sandbox.advance(actor.key, nowMs));
    return latest;
  };
  const host = { activitySeq: () => sandbox.activitySeq, nextActivity: (since: number) => sandbox.nextActivity(since), seqBeforeFirst };
  const time: SettleTime = { now: () => clock.now(), sleep: (ms) => (clock.sleep ? clock.sleep(ms) : realTime.sleep(ms)) };
  const deadline = startedAt + settings.settleBudgetMs;
  const firedPart = () => (beforeFired ? { fired, beforeFired } : { fired: [] });
  // As outside settling, a delayed event whose machine code fails does not undo what came before it:
  // the step commits as it stood, the event stays pending, and the durable timers retry it (then
  // drop it), each try logged. The children the dropped actor ran are gone with it.
  const timerFailed = (failed: TimerFailedWhileSettling): Settled => {
    const type = failed.event.type;
    logs.service(
      actor.orgId,
      actor.machine,
      actor.name,
      'warn',
      `delayed event ${type} failed as it fired while the step settled: ${failed.failure.message}; it stays pending and is retried`,
      { event: type },
      sandbox.versionId,
    );
    return { result: latest, stoppedChildren: latest.runningChildren.map((child) => child.id), ...firedPart(), timerFailed: true };
  };
  let outcome: Awaited<ReturnType<typeof settle>>;
  try {
    outcome = await settle(advance, first, deadline, host, time);
  } catch (error) {
    if (error instanceof TimerFailedWhileSettling) return timerFailed(error);
    throw error;
  }
  // A raw setInterval keeps a callback timer due just past the budget however long it waits: the
  // step that reached its budget with one still set is cut as one that timed out (its timers
  // cleared), or every later step of the instance would wait out the budget again.
  const callbacksSet = outcome.result.pendingTimers.some((timer) => timer.kind === 'callback');
  const ranOut = outcome.timedOut || (callbacksSet && clock.now() >= deadline);
  if (!ranOut) return { result: outcome.result, stoppedChildren: [], ...firedPart() };
  if (callbacksSet) {
    logs.service(
      actor.orgId,
      actor.machine,
      actor.name,
      'warn',
      `cleared its setTimeout and setInterval timers: the machine did not settle within ${settings.settleBudgetMs} ms`,
      {},
      sandbox.versionId,
    );
  }
  const stopped = (await sandbox.stopChildren(actor.key)).map((child) => child.id);
  for (const id of stopped) {
    logs.service(
      actor.orgId,
      actor.machine,
      actor.name,
      'warn',
      `stopped child ${id}: the machine did not settle within ${settings.settleBudgetMs} ms`,
      { child: id },
      sandbox.versionId,
    );
  }
  // The state after stopping the children (read back; a delayed event due inside the budget fires,
  // recorded; one due after it is left to the timers, as when the step settles in time: a step that
  // itself took longer than the budget must not take in delayed events the budget does not reach).
  try {
    const result = await advance(Math.max(advancedTo, Math.min(clock.now(), deadline)));
    return { result, stoppedChildren: stopped, ...firedPart() };
  } catch (error) {
    if (!(error instanceof TimerFailedWhileSettling)) throw error;
    const failed = timerFailed(error);
    return { ...failed, stoppedChildren: [...stopped, ...failed.stoppedChildren] };
  }
};

/** History records for the delayed events that fired while settling, numbered on from `lastSeq`. */
export const firedRecords = (settled: Settled, lastSeq: number): TransitionRecord[] =>
  settled.fired.map((f, i) => ({
    seq: lastSeq + i + 1,
    createdAt: '',
    ts: f.appliedAt,
    event: f.event,
    state: f.result.state,
  }));
