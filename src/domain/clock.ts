/** Where the runtime reads the time: the system's, or one a test moves by hand. */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  /** Waits `ms` on this clock (the settle loop's waits); absent: a real timer. A test's clock moves itself instead. */
  sleep?(ms: number): Promise<void>;
}

export const systemClock: Clock = { now: () => Date.now() };
