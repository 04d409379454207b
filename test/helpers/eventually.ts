/**
 * Waits for a condition instead of sleeping for a fixed time: polls `condition` every `intervalMs`
 * until it holds (a truthy value, which is returned), and throws with `message` (and the last value
 * or error seen) once `timeoutMs` has passed without it. A condition that throws counts as not yet.
 *
 * A test that must see something NOT happen for a while (a timer not firing early, a limit not let
 * through) still waits a bounded, fixed time: this helper is for what is awaited, not for what is not.
 */
export interface EventuallyOptions {
  /** How long to keep polling before giving up (default 15 s: generous, since a loaded 2-core host is slow, and a pass is fast). */
  timeoutMs?: number;
  /** Pause between two checks (default 50 ms). */
  intervalMs?: number;
  /** What did not happen, for the error. */
  message?: string;
}

/** What a truthy value of T can be. */
type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export const eventually = async <T>(condition: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Truthy<T>> => {
  const { timeoutMs = 15_000, intervalMs = 50, message = 'the condition did not hold in time' } = options;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as Truthy<T>;
      last = value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`${message} (within ${timeoutMs} ms; last seen: ${seen?.slice(0, 500)})`);
    }
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
};
