/**
 * What the sandbox worker's main thread is running, shared with its stall watchdog thread
 * (stall-watchdog.ts). While machine code runs, the main thread is blocked in a synchronous call into
 * an isolate, so only memory it shares can be read meanwhile.
 *
 * Layout of the SharedArrayBuffer: three float64s (the request id running, 0 for none, DELIVERY for a
 * host call's outcome being delivered; when it began, ms since the epoch; the node's number of the
 * version whose code runs), then three int32s: the retired flag, the sleeping flag, and how many calls
 * began (wrapping). The main thread writes the three float64s around each call (three stores, no
 * allocation); the watchdog reads them and trusts a read only when the id did not change meanwhile.
 * Once the watchdog sets the retired flag, the main thread runs nothing more. A watchdog with nothing to
 * watch for a while sleeps (sleepUntilCall) instead of looking 40 times a second, and the next call's
 * begin wakes it.
 */
const RUNNING = 0;
const STARTED_AT = 1;
const VERSION = 2;
const RETIRED = 6; // int32 index, after the three float64s
const SLEEPING = 7;
const BEGUN = 8;
const BYTES = 40;

/** The "request id" of a delivery: machine code runs when a fetch's answer arrives, outside any request. */
export const DELIVERY = -1;

export class CallSlot {
  private readonly numbers: Float64Array;
  private readonly flags: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(BYTES)) {
    this.numbers = new Float64Array(buffer, 0, 3);
    this.flags = new Int32Array(buffer);
  }

  /** Main thread: request `id` (or DELIVERY) starts running the code of version number `versionNo` now. */
  begin(id: number, versionNo: number): void {
    this.numbers[STARTED_AT] = Date.now();
    this.numbers[VERSION] = versionNo;
    this.numbers[RUNNING] = id;
    this.flags[BEGUN] = ((this.flags[BEGUN] as number) + 1) | 0;
    // (an atomic exchange orders this after the stores above: a watchdog that set the flag and then
    // found no call running is woken; one that finds this call running never waits)
    if (Atomics.exchange(this.flags, SLEEPING, 0) === 1) Atomics.notify(this.flags, SLEEPING);
  }

  /** Main thread: the call returned. */
  end(): void {
    this.numbers[RUNNING] = 0;
  }

  /** The request running and since when, or undefined (none, or it changed while being read). */
  running(): { id: number; startedAt: number; versionNo: number } | undefined {
    const id = this.numbers[RUNNING] as number;
    if (id === 0) return undefined;
    const startedAt = this.numbers[STARTED_AT] as number;
    const versionNo = this.numbers[VERSION] as number;
    return this.numbers[RUNNING] === id ? { id, startedAt, versionNo } : undefined;
  }

  /** How many calls began (wrapping): a watchdog compares two reads to know whether any began between. */
  get callsBegun(): number {
    return this.flags[BEGUN] as number;
  }

  /** Whether the watchdog sleeps now (sleepUntilCall). */
  get watchdogAsleep(): boolean {
    return Atomics.load(this.flags, SLEEPING) === 1;
  }

  /**
   * Watchdog thread: blocks until a call begins, or `timeoutMs` passed (a backstop: a wake-up missed
   * would leave a stall unseen only that long). Returns at once if a call is running.
   */
  sleepUntilCall(timeoutMs: number): void {
    Atomics.store(this.flags, SLEEPING, 1);
    if (this.running() === undefined) Atomics.wait(this.flags, SLEEPING, 1, timeoutMs);
    Atomics.store(this.flags, SLEEPING, 0);
  }

  retire(): void {
    Atomics.store(this.flags, RETIRED, 1);
  }

  get retired(): boolean {
    return Atomics.load(this.flags, RETIRED) === 1;
  }
}
