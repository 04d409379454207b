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

export function callSync(
  isolate: ivm.Isolate,
  fn: ivm.Reference<(...args: CallArg[]) => unknown>,
  args: CallArg[],
  limits: CallLimits,
): string {
  if (isolate.isDisposed) throw new SandboxDisposedError();
  let result: unknown;
  try {
    result = fn.applySync(undefined, args, { timeout: limits.cpuLimitMs });
  } catch (e) {
    throw translateIsolateError(e, isolate, limits);
  }
  if (typeof result !== 'string') throw new MachineCodeError('the sandbox harness returned a non-string result');
  return result;
}
