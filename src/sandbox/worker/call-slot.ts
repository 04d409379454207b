/**
 * What the sandbox worker's main thread is running, shared with its stall watchdog thread
 * (stall-watchdog.ts). While machine code runs, the main thread is blocked in a synchronous call into
 * an isolate, so only memory it shares can be read meanwhile.
 *
 * Layout of the SharedArrayBuffer: three float64s (the request id running, 0 for none, DELIVERY for a
 * host call's outcome being delivered; when it began, ms since the epoch; the node's number of the
 * version whose code runs), then an int32 retired flag. The main thread writes the first three around
 * each call (three stores, no allocation); the watchdog reads them and trusts a read only when the id
 * did not change meanwhile. Once the watchdog sets the flag, the main thread runs nothing more.
 */
const RUNNING = 0;
const STARTED_AT = 1;
const VERSION = 2;
const RETIRED = 6; // int32 index, after the three float64s
const BYTES = 32;

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

  retire(): void {
    Atomics.store(this.flags, RETIRED, 1);
  }

  get retired(): boolean {
    return Atomics.load(this.flags, RETIRED) === 1;
  }
}
