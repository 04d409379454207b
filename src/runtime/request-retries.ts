/**
 * How a request is run again when what failed under it was not its fault (request-retries.test.ts):
 * a sandbox worker retired or crashed under it, its isolate gone or out of memory, the stored head
 * moved under its owner. Nothing was committed by a failed run, so running it again is safe; the
 * limits say when to give up and whom to blame.
 */
import { machineCodeFailed, ServiceError } from '../domain/errors.js';
import type { Logger } from '../domain/logger.js';
import {
  MachineCodeError,
  SandboxCrashedError,
  SandboxDisposedError,
  SandboxHeldError,
  SandboxMemoryError,
  SandboxMovedError,
  SandboxTimeoutError,
  StepTooLargeError,
} from '../sandbox/index.js';
import { SequenceConflictError } from '../store/instance-store.js';

const noop = (): void => undefined;

/**
 * How many times in a row a request is run again because the worker it waited in was retired (see
 * untilNotMoved). One is the usual case; more means stalls one after another, and then the 503 says so.
 */
const MAX_MOVES = 3;

/**
 * How many times in a row a request is run again because the stored head moved under it. Each run
 * again starts from the head the store caught up to (log-instance-store.ts, append), so only another
 * writer committing in between moves it again: in a cluster, for the moment a partition changes hands,
 * the node giving it up still answers requests already routed to it while the new owner takes new ones
 * (three sends to one instance through three nodes within 60 ms met two such moves in a row). More
 * than this means writers racing for good, and the 409 says so.
 */
const MAX_HEAD_MOVES = 3;

/** A request failed because the sandbox worker died under it: nothing was applied; see afterCrashOnceMore. */
export class WorkerCrashFailure extends ServiceError {
  constructor(
    message: string,
    /** Killed from outside: retryable (503), and no version is to blame for it. */
    readonly external: boolean,
  ) {
    super(external ? 503 : 400, external ? 'unavailable' : 'machine-code-error', message);
  }

  /** What a worker's death under a call (a step, a version's load) is to the request that made it. */
  static of(crash: SandboxCrashedError): WorkerCrashFailure {
    return new WorkerCrashFailure(crash.message, crash.killedFromOutside);
  }
}

/**
 * A request's machine code ran its version's isolate out of memory (the isolate is gone): answered
 * 400 like any machine-code failure, but run once more first (see untilNotMoved).
 */
class IsolateMemoryFailure extends ServiceError {
  constructor(message: string) {
    super(400, 'machine-code-error', message);
  }
}

/**
 * The stored head moved under the actor (in a cluster: another node wrote the instance while this one
 * did not own it, and this node's copy had not caught up yet). Nothing was written; the task is run
 * once more on the head reloaded from the store.
 */
export class HeadMovedFailure extends ServiceError {
  constructor() {
    super(409, 'invalid-state', 'the instance was changed concurrently; retry');
  }
}

interface RequestRetriesDeps {
  logger: Logger;
  /** Moves a version that crashed its worker twice in a row (with its org) to the quarantine worker (sandbox-pool.ts). */
  quarantineVersion(versionId: string): { orgId: string | undefined } | undefined;
}

export class RequestRetries {
  /** The tail of the one-at-a-time queue of requests run again after a worker crash. */
  private crashRetries: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: RequestRetriesDeps) {}

  /**
   * When the sandbox worker dies, every request it was running fails, though usually only one of them
   * (the one whose machine code crashed it) is at fault. None of them was applied: the crash comes
   * before the commit and the live actors are rebuilt from their committed heads. So each is run once
   * more, one at a time, so that the culprit's second run, which crashes the new worker again, takes no
   * other retry with it and fails alone. Requests that arrive meanwhile run as usual. A retried event
   * runs its machine code again: a fetch it started before the crash is made a second time.
   *
   * A version whose request crashes a worker on its second run too is quarantined, with its org's other
   * versions (sandbox-pool.ts); not when the worker was killed from outside (SIGKILL), which is answered
   * 503 to retry.
   * That second crash is almost surely its own: no other retry ran beside it, only first attempts.
   */
  async afterCrashOnceMore<T>(task: () => Promise<T>, versionOf: () => string | undefined): Promise<T> {
    try {
      return await this.untilNotMoved(task);
    } catch (error) {
      if (!(error instanceof WorkerCrashFailure)) throw error;
      const retry = this.crashRetries.then(() => this.untilNotMoved(task));
      this.crashRetries = retry.then(noop, noop);
      try {
        return await retry;
      } catch (again) {
        const versionId = versionOf();
        const blamed = again instanceof WorkerCrashFailure && !again.external && versionId !== undefined;
        const quarantined = blamed ? this.deps.quarantineVersion(versionId) : undefined;
        if (quarantined) {
          const org = quarantined.orgId === undefined ? '' : `, and so does every version of org ${quarantined.orgId}`;
          this.deps.logger.warn(
            `machine version ${versionId} crashed its sandbox worker twice in a row: it runs in the quarantine worker from now on${org}`,
          );
        }
        throw again;
      }
    }
  }

  /**
   * Runs `task` again while it fails with SandboxMovedError: it was waiting in a sandbox worker that
   * another call held past the stall limit, and was not run there (sandbox-client.ts). It is innocent
   * by construction, so it goes again at once, not behind crash retries, and nobody is blamed. So does
   * a task whose version's isolate went away between two of its calls (SandboxDisposedError: the
   * worker was retired under the culprit itself, or the version was unloaded): nothing was committed.
   *
   * A task whose isolate ran out of memory is run once more too, in the version's fresh isolate: what
   * filled the old one may have been the version's live actors, not this task's machine code (they
   * are kept within their budget, --live-actor-memory-mb, but only checked every few calls). Machine
   * code that fills the isolate by itself does so again and gets its 400.
   *
   * A task whose own earlier call held its worker past the stall limit (its org is in the quarantine
   * worker by then) finds its isolate gone with that worker if it had not settled yet (a timer or
   * interval callback that runs that long, say): it runs once more, and when that stalls too, it fails
   * with a 400 (SandboxHeldError) instead of being tried until it is a 503.
   */
  async untilNotMoved<T>(task: () => Promise<T>): Promise<T> {
    let outOfMemory = 0;
    let headMoved = 0;
    let heldWorker = 0;
    for (let moves = 1; ; moves++) {
      try {
        return await task();
      } catch (error) {
        if (error instanceof HeadMovedFailure && headMoved++ < MAX_HEAD_MOVES) continue;
        if (error instanceof SandboxDisposedError && error.ownStall && heldWorker++ > 0)
          throw machineCodeFailed(new SandboxHeldError(error.ownStall).message);
        if (error instanceof IsolateMemoryFailure && outOfMemory++ === 0) {
          this.deps.logger.warn(
            `a request ran its machine version's isolate out of memory: it runs once more, in a fresh isolate (${error.message})`,
          );
          continue;
        }
        const moved = error instanceof SandboxMovedError || error instanceof SandboxDisposedError;
        if (!moved || moves >= MAX_MOVES) throw error;
      }
    }
  }
}

/**
 * What a failure of the sandbox or the store means to the request: typed request errors (mapped to
 * HTTP in one place, api/error-response.ts), or the failures the retries above tell apart.
 */
export function asRequestError(error: unknown, instance: string, logger: Logger): unknown {
  if (error instanceof SandboxCrashedError) return WorkerCrashFailure.of(error);
  if (error instanceof StepTooLargeError) return new ServiceError(400, 'state-too-large', `${error.message}; the event was not applied`);
  if (error instanceof MachineCodeError) return machineCodeFailed(`machine code threw: ${error.message}`);
  if (error instanceof SandboxTimeoutError) return machineCodeFailed(error.message);
  if (error instanceof SandboxMemoryError) return new IsolateMemoryFailure(error.message);
  if (error instanceof SequenceConflictError) {
    logger.warn('instance head moved under its owner', { instance, error: error.message });
    return new HeadMovedFailure();
  }
  return error;
}

/** Authorizers run machine code too: a runaway one fails the request, not the node. */
export async function guarded<T>(call: Promise<T>, instance: string, logger: Logger): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw asRequestError(error, instance, logger);
  }
}
