import type { StepResult } from '../sandbox/index.js';

/** How the loop learns that a host call (fetch) of the isolate finished. */
interface HostActivity {
  activitySeq(): number;
  nextActivity(since: number): Promise<void>;
}

/** Where the loop reads the time and how it waits: the system's by default; a test's clock moves itself instead of waiting. */
export interface SettleTime {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const realTime: SettleTime = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

interface SettleOutcome {
  result: StepResult;
  /** The budget ran out with children still running (or machine code's timers still due inside it). */
  timedOut: boolean;
}

/**
 * Whether nothing is left to wait for: no child running, no host call out, no `setTimeout` of machine
 * code due inside the budget (it fires only while the step runs). A delayed event (`after`, a delayed
 * send) does not hold the answer: it is a durable timer, delivered as an event of its own when due
 * (wire-protocol §8.2), so a state with a one-second `after` answers at once, not a second later.
 */
export const isSettled = (result: StepResult, deadlineMs: number): boolean =>
  result.runningChildren.length === 0 &&
  result.pendingHostCalls === 0 &&
  !result.pendingTimers.some((timer) => timer.kind === 'callback' && timer.dueAt <= deadlineMs);

/**
 * Waits until the machine is settled (wire-protocol §8.1, isSettled): no running child services and no
 * host call (fetch) in flight. The sandbox has no clock of its own, so this loop sleeps until the next
 * due timer, a host call's completion or the deadline, and then advances the actor's clock: a delayed
 * event that comes due while a child still runs (a timeout racing a fetch) fires within the step.
 */
export const settle = async (
  advance: (nowMs: number) => StepResult | Promise<StepResult>,
  first: StepResult,
  deadlineMs: number,
  host?: HostActivity & { seqBeforeFirst: number },
  time: SettleTime = realTime,
): Promise<SettleOutcome> => {
  let result = first;
  // Host activity is counted from before each step: a completion during an awaited step must wake us.
  let seq = host?.seqBeforeFirst ?? 0;
  for (;;) {
    let nextDue: number | undefined;
    for (const timer of result.pendingTimers) {
      if (timer.dueAt <= deadlineMs && (nextDue === undefined || timer.dueAt < nextDue)) nextDue = timer.dueAt;
    }
    if (isSettled(result, deadlineMs)) return { result, timedOut: false };
    const now = time.now();
    if (now >= deadlineMs) return { result, timedOut: true };
    const wakeAt = Math.min(nextDue ?? deadlineMs, deadlineMs);
    let woke: 'time' | 'activity' = 'time';
    if (wakeAt > now) {
      // Wait on host activity only while this actor has host calls out: the isolate's other actors
      // finishing theirs wake us spuriously, which costs one harmless advance.
      woke =
        result.pendingHostCalls > 0 && host
          ? await sleepOrActivity(wakeAt - now, host.nextActivity(seq))
          : (await time.sleep(wakeAt - now), 'time');
    }
    const t = time.now();
    seq = host?.activitySeq() ?? 0;
    result = await advance(woke === 'activity' ? t : Math.max(t, wakeAt));
  }
};

/** Sleeps until `ms` pass or `activity` resolves, whichever is first, and clears the timer either way. */
const sleepOrActivity = (ms: number, activity: Promise<void>): Promise<'time' | 'activity'> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve('time'), ms);
    void activity.then(() => {
      clearTimeout(timer);
      resolve('activity');
    });
  });
