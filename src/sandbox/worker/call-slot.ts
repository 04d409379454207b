/**
 * What the sandbox worker's main thread is running, shared with its stall watchdog thread
 * (stall-watchdog.ts). While machine code runs, the main thread is blocked in a synchronous call into
 * an isolate, so only memory it shares can be read meanwhile.
 *
 * Layout of the SharedArrayBuffer: two float64s (the request id running, 0 for none; when it began,
 * ms since the epoch), then an int32 retired flag. The main thread writes the first two around each
 * call (two stores, no allocation); the watchdog reads them twice and trusts a read only when the id
 * did not change in between. Once the watchdog sets the flag, the main thread runs nothing more.
 */
const RUNNING = 0;
const STARTED_AT = 1;
const RETIRED = 4; // int32 index, after the two float64s
const BYTES = 24;

export class CallSlot {
  private readonly numbers: Float64Array;
  private readonly flags: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(BYTES)) {
    this.numbers = new Float64Array(buffer, 0, 2);
    this.flags = new Int32Array(buffer);
  }

  /** Main thread: request `id` starts running machine code now. */
  begin(id: number): void {
    this.numbers[STARTED_AT] = Date.now();
    this.numbers[RUNNING] = id;
  }

  /** Main thread: the call returned. */
  end(): void {
    this.numbers[RUNNING] = 0;
  }

  /** The request running and since when, or undefined (none, or it changed while being read). */
  running(): { id: number; startedAt: number } | undefined {
    const id = this.numbers[RUNNING] as number;
    if (id === 0) return undefined;
    const startedAt = this.numbers[STARTED_AT] as number;
    return this.numbers[RUNNING] === id ? { id, startedAt } : undefined;
  }

  retire(): void {
    Atomics.store(this.flags, RETIRED, 1);
  }

  get retired(): boolean {
    return Atomics.load(this.flags, RETIRED) === 1;
  }
}
