import type { StepResult } from '../sandbox/index.js';

export interface SettleOutcome {
  result: StepResult;
  /** The budget ran out with children still running or delayed events still due inside it. */
  timedOut: boolean;
}

/**
 * Waits until the machine is settled (wire-protocol §8.1): no running child services and no delayed
 * event due inside the budget. The sandbox has no clock of its own, so this loop sleeps until the
 * next due timer (or the deadline) and then advances the actor's clock.
 */
export const settle = async (
  advance: (nowMs: number) => StepResult,
  first: StepResult,
  deadlineMs: number,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<SettleOutcome> => {
  let result = first;
  for (;;) {
    let nextDue: number | undefined;
    for (const timer of result.pendingTimers) {
      if (timer.dueAt <= deadlineMs && (nextDue === undefined || timer.dueAt < nextDue)) nextDue = timer.dueAt;
    }
    if (result.runningChildren.length === 0 && nextDue === undefined) return { result, timedOut: false };
    const now = Date.now();
    if (now >= deadlineMs) return { result, timedOut: true };
    const wakeAt = Math.min(nextDue ?? deadlineMs, deadlineMs);
    if (wakeAt > now) await sleep(wakeAt - now);
    result = advance(Math.max(Date.now(), wakeAt));
  }
};
