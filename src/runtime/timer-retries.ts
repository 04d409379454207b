/**
 * The retry policy of delayed events whose delivery failed (a paused instance, machine code that
 * threw): each failed timer moves a retry delay ahead, up to `maxRetries` times, then is dropped.
 * Pure: the runtime writes the head it gives and the log lines it says (timer-firing.ts
 * deliveryFailed); timer-retries.test.ts runs it alone.
 */
import type { PendingTimer } from '../domain/machine-state.js';
import type { InstanceHead } from '../store/instance-store.js';

interface TimerRetrySettings {
  retryDelayMs: number;
  maxRetries: number;
}

interface TimerRetryLine {
  level: 'warn' | 'error';
  message: string;
  attrs: { event: string; attempts: number };
}

interface TimerRetryPlan {
  /** The head with the failed timers moved or dropped and their attempts counted. */
  next: InstanceHead;
  /** Whether one of them ran out of retries. */
  dropped: boolean;
  /** What the instance's logs say of each. */
  lines: TimerRetryLine[];
}

export const timerRetryPlan = (
  head: InstanceHead,
  due: PendingTimer[],
  reason: string,
  settings: TimerRetrySettings,
  now: number,
): TimerRetryPlan => {
  const retryAt = now + settings.retryDelayMs;
  const failed = new Set(due.map((timer) => timer.id));
  // (by timer id, which machine code chooses: a Map, so that `constructor` or `__proto__` are ids like any other)
  const timerAttempts = new Map(Object.entries(head.timerAttempts ?? {}));
  const pendingTimers: PendingTimer[] = [];
  const lines: TimerRetryLine[] = [];
  let dropped = false;
  for (const timer of head.pendingTimers) {
    if (!failed.has(timer.id)) {
      pendingTimers.push(timer);
      continue;
    }
    const attempts = (timerAttempts.get(timer.id) ?? 0) + 1;
    const label = timer.kind === 'event' ? timer.event.type : timer.id;
    if (attempts > settings.maxRetries) {
      timerAttempts.delete(timer.id);
      dropped = true;
      lines.push({
        level: 'error',
        message: `dropped delayed event ${label} after ${attempts} failed deliveries: ${reason}`,
        attrs: { event: label, attempts },
      });
    } else {
      timerAttempts.set(timer.id, attempts);
      pendingTimers.push({ ...timer, dueAt: retryAt });
      lines.push({
        level: 'warn',
        message: `could not deliver delayed event ${label} (attempt ${attempts}): ${reason}; retrying in ${settings.retryDelayMs} ms`,
        attrs: { event: label, attempts },
      });
    }
  }
  return { next: { ...head, pendingTimers, timerAttempts: Object.fromEntries(timerAttempts) }, dropped, lines };
};
