/**
 * One synchronous crossing into the isolate, with the failure modes of isolated-vm turned into typed
 * errors. Arguments are strings/numbers (plus, for delivering a host call's outcome, a host-made copy
 * of response bytes); results are strings only.
 */
import type ivm from 'isolated-vm';
import { SandboxDisposedError, SandboxMemoryError, SandboxTimeoutError, MachineCodeError } from './errors.js';

export interface CallLimits {
  cpuLimitMs: number;
  memoryLimitMb: number;
}

/** What may be handed into the isolate: primitives, or bytes the host copied in (never a Reference). */
export type CallArg = string | number | undefined | ivm.Copy<ArrayBuffer>;

const TIMED_OUT = /Script execution timed out/;

/** Maps an exception thrown by isolated-vm while running isolate code. */
export function translateIsolateError(e: unknown, isolate: ivm.Isolate, limits: CallLimits): Error {
  if (isolate.isDisposed) {
    const message = e instanceof Error ? e.message : String(e);
    return /memory/i.test(message) ? new SandboxMemoryError(limits.memoryLimitMb) : new SandboxDisposedError();
  }
  if (e instanceof Error && TIMED_OUT.test(e.message)) return new SandboxTimeoutError(limits.cpuLimitMs);
  const message = e instanceof Error ? e.message : String(e);
  return new MachineCodeError(message);
}

/**
 * The `timeout` to give isolated-vm for a call limited to `limitMs`: at least `limitMs`, with the
 * deadlines of calls made close together gathered on a few points in time.
 *
 * Why: each timed call adds a timer to isolated-vm's timer thread, which sleeps until the earliest
 * deadline and then drops the timers that are due (finished calls leave theirs behind). With a
 * deadline per call, thousands of calls a second wake that thread thousands of times (measured: ≈ 15 %
 * of the sandbox worker's CPU at 64 concurrent clients, plus the contention its wake-ups cause). With
 * deadlines gathered on boundaries `quantum` apart it wakes once per boundary. A timer joins the
 * thread only if it is due after the thread's next wake-up (else isolated-vm starts another thread),
 * so within one boundary every deadline after the first is placed 1 ms after it.
 */
const windows = new Map<number, { end: number; anchor: number }>();

export function timeoutFor(limitMs: number, nowMs: number = performance.now()): number {
  const quantum = Math.max(1, Math.min(50, Math.floor(limitMs / 4)));
  const end = Math.ceil((nowMs + limitMs) / quantum) * quantum;
  const window = windows.get(limitMs);
  if (window === undefined || window.end !== end) {
    const ms = Math.ceil(end - nowMs);
    windows.set(limitMs, { end, anchor: nowMs + ms });
    return ms;
  }
  return Math.ceil(window.anchor + 1 - nowMs);
}

export function callSync(
  isolate: ivm.Isolate,
  fn: ivm.Reference<(...args: CallArg[]) => unknown>,
  args: CallArg[],
  limits: CallLimits,
): string {
  if (isolate.isDisposed) throw new SandboxDisposedError();
  let result: unknown;
  try {
    result = fn.applySync(undefined, args, { timeout: timeoutFor(limits.cpuLimitMs) });
  } catch (e) {
    throw translateIsolateError(e, isolate, limits);
  }
  if (typeof result !== 'string') throw new MachineCodeError('the sandbox harness returned a non-string result');
  return result;
}
