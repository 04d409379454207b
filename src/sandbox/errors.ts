/**
 * Typed failures of the sandbox. They are ServiceErrors so that anything not handled by the runtime
 * still maps to a sensible HTTP answer, but the runtime is expected to catch them by class:
 * - BundleValidationError: the uploaded code is unusable (400, parameter "code");
 * - MachineCodeError: machine code threw (or produced non-JSON context) during a step; the actor was
 *   discarded and must be rebuilt from the last committed snapshot;
 * - SandboxTimeoutError: a call exceeded its CPU-time limit; the actor was discarded, the isolate is kept;
 * - SandboxMemoryError: the isolate hit its memory limit and is gone; load the version again.
 */
import { ServiceError } from '../domain/errors.js';
import { limits } from '../domain/limits.js';
import { clipped } from '../domain/clipped.js';

export class BundleValidationError extends ServiceError {
  constructor(message: string) {
    super(400, 'invalid-parameter', message, 'code');
    this.name = 'BundleValidationError';
  }
}

export class MachineCodeError extends ServiceError {
  constructor(message: string) {
    super(500, 'internal', clipped(message, limits.maxMachineErrorChars));
    this.name = 'MachineCodeError';
  }
}

export class SandboxTimeoutError extends ServiceError {
  constructor(readonly limitMs: number) {
    super(500, 'internal', `machine code exceeded the CPU time limit of ${limitMs} ms`);
    this.name = 'SandboxTimeoutError';
  }
}

export class SandboxMemoryError extends ServiceError {
  constructor(limitMb: number) {
    super(503, 'unavailable', `machine code exceeded the memory limit of ${limitMb} MB`);
    this.name = 'SandboxMemoryError';
  }
}

/** A call of an actor's that held its sandbox worker past the stall limit (stall-watchdog.ts). */
export interface OwnStall {
  /** The limit it went past (--sandbox-stall-ms). */
  stallMs: number;
}

/** Calling into an isolate that is no longer there (disposed earlier, or after a memory error). */
export class SandboxDisposedError extends ServiceError {
  /**
   * @param ownStall set when the isolate went with a worker retired for the stall of this same actor's
   *   previous call: the actor's request itself held the worker, and is not a bystander.
   */
  constructor(readonly ownStall?: OwnStall) {
    super(503, 'unavailable', 'the machine version sandbox was disposed; load it again');
    this.name = 'SandboxDisposedError';
  }
}

/** A call on an actor key that has no live actor (never started, stopped, or discarded after a failure). */
export class NoLiveActorError extends ServiceError {
  constructor(instanceKey: string) {
    super(500, 'internal', `no live actor for ${instanceKey}; start it from its snapshot first`);
    this.name = 'NoLiveActorError';
  }
}

/** A step whose result (state, snapshot, pending events) is too large to carry back and persist. */
export class StepTooLargeError extends MachineCodeError {
  constructor(message: string) {
    super(message);
    this.name = 'StepTooLargeError';
  }
}

/**
 * The request was waiting in a sandbox worker that another call held past the stall limit; that worker
 * was retired and the request was not run there (stall-watchdog.ts). Nothing of it was applied: the
 * runtime runs it again at once in the next worker.
 */
export class SandboxMovedError extends ServiceError {
  constructor() {
    super(
      503,
      'unavailable',
      "the sandbox worker was replaced while this request waited behind another call's machine code; nothing was applied: retry",
    );
    this.name = 'SandboxMovedError';
  }
}

/**
 * A request whose machine code held its sandbox worker past the stall limit before it was done (the
 * instance not settled, an http API handler still awaiting), twice in a row (the second time in the
 * quarantine worker): its isolate went with the retired worker, so the request could not go on, and
 * running it again would only stall again. Typically a callback or an interval whose runs take that long.
 */
export class SandboxHeldError extends SandboxTimeoutError {
  constructor({ stallMs }: OwnStall) {
    super(stallMs);
    this.message = `machine code held its sandbox worker past the stall limit of ${stallMs} ms of CPU (--sandbox-stall-ms) and had more to run, which it could not do in the retired worker, on two attempts in a row; nothing was applied`;
    this.name = 'SandboxHeldError';
  }
}

/**
 * A call that held a retired sandbox worker (stall-watchdog.ts) past its CPU limit and a grace period
 * without the limit stopping it (isolated-vm's limit does not interrupt an isolate thrashing at its
 * memory limit), so the node stopped the worker.
 */
export class SandboxStalledError extends SandboxTimeoutError {
  constructor(limitMs: number, heldMs: number) {
    super(limitMs);
    this.message = `machine code held its sandbox worker for ${heldMs} ms, past the CPU time limit of ${limitMs} ms, without stopping at it (a spin, or an isolate thrashing at its memory limit), so the worker was stopped; nothing was applied`;
    this.name = 'SandboxStalledError';
  }
}
