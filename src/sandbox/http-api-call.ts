/**
 * Running a version's `httpApiMapper[slug]` function (wire-protocol §3.14) to its end: an async one
 * may wait for its fetches and timers, up to a deadline of wall-clock time; each crossing into the
 * isolate has the usual CPU limit. Machine code throwing is an outcome, not an exception; the
 * sandbox's own failures (CPU or memory limit) throw as for steps.
 */
import { SandboxDisposedError } from './errors.js';
import type { DeliveringIsolate } from './host-call-delivery.js';
import type { HarnessArgs } from './isolate-sources.js';
import { MAX_STEP_RESULT_CHARS } from './limits.js';
import { MAX_STATE_DEPTH, tooDeep } from '../domain/json-depth.js';
import type { HttpApiOutcome } from './types.js';

/** Runs a crossing into the isolate, e.g. timed for a watchdog (see VersionIsolate.httpApiHandler). */
export type Crossings = <T>(crossing: () => T) => T;
export const runCrossing: Crossings = (crossing) => crossing();

/** Collects in a row that may each run due timers of an http API call before it must wait. */
const MAX_HTTP_TIMER_ROUNDS = 1_000;

/**
 * Runs `fn` of `httpApiMapper[slug]` with `input` under `key`, its own key (an actor key always has
 * slashes): what it leaves behind is dropped by it, also when the first crossing is cut short by the
 * CPU limit. `around` runs each crossing into the isolate that may run machine code.
 */
export async function runHttpApiCall(
  isolate: DeliveringIsolate,
  key: string,
  slug: string,
  fn: 'handler' | 'responseMapper',
  input: unknown,
  name: string,
  deadlineMs: number,
  around: Crossings,
): Promise<HttpApiOutcome> {
  const cross = <K extends 'httpCall' | 'httpCollect'>(harnessFn: K, args: HarnessArgs<K>): string =>
    around(() => isolate.call(harnessFn, args));
  const deadline = Date.now() + deadlineMs;
  let finished = false;
  try {
    const started = JSON.parse(cross('httpCall', [key, slug, fn, JSON.stringify(input), Date.now(), name])) as {
      missing?: string;
      error?: string;
      started?: true;
    };
    if (started.started !== true) {
      finished = true;
      if (typeof started.missing === 'string') return { kind: 'missing', message: started.missing };
      return { kind: 'threw', message: started.error ?? 'the sandbox produced a malformed answer' };
    }
    for (;;) {
      const failed = isolate.deliveryFailures.get(key);
      if (failed !== undefined) throw failed;
      let text = cross('httpCollect', [key, Date.now()]);
      for (let round = 0; text === '{"pending":true,"fired":true}'; round++) {
        if (round >= MAX_HTTP_TIMER_ROUNDS)
          return { kind: 'threw', message: `its timers kept firing (${MAX_HTTP_TIMER_ROUNDS} rounds) without it finishing` };
        text = cross('httpCollect', [key, Date.now()]);
      }
      if (text.length > MAX_STEP_RESULT_CHARS)
        return {
          kind: 'threw',
          message: `its result is too large: ${text.length} characters of JSON (at most ${MAX_STEP_RESULT_CHARS})`,
        };
      if (tooDeep(text, MAX_STATE_DEPTH + 1))
        return { kind: 'threw', message: `its result nests objects and arrays more than ${MAX_STATE_DEPTH} levels deep` };
      let protoKey = false;
      // (a key named __proto__ in the event or initial context a handler answers, as in a request body
      // of the node's own API, would become a prototype wherever plain assignment copies it)
      const noteProtoKey = (key: string, value: unknown) => {
        if (key === '__proto__') protoKey = true;
        return value;
      };
      const collected = (fn === 'handler' ? JSON.parse(text, noteProtoKey) : JSON.parse(text)) as {
        value?: unknown;
        error?: string;
        pending?: true;
        nextDueAt?: number | null;
      };
      if (protoKey) {
        finished = true;
        return { kind: 'threw', message: 'its result has a key named __proto__, which is not allowed' };
      }
      if (collected.pending !== true) {
        finished = true;
        return typeof collected.error === 'string'
          ? { kind: 'threw', message: collected.error }
          : { kind: 'returned', value: collected.value };
      }
      const now = Date.now();
      if (now >= deadline) return { kind: 'threw', message: `it did not finish within ${deadlineMs} ms` };
      if ((collected.nextDueAt ?? null) === null && isolate.hostCalls.pendingFor(key) === 0) {
        return {
          kind: 'threw',
          message: 'it returned a promise that nothing of it can settle any more (it has no timer or fetch pending)',
        };
      }
      // Read right after the collect (nothing is delivered in between): a completion after it wakes us.
      const seq = isolate.hostCalls.activitySeq;
      await waitUntil(isolate.hostCalls.nextActivity(seq), Math.min(deadline, collected.nextDueAt ?? Infinity) - now);
      if (!isolate.healthy()) throw new SandboxDisposedError();
    }
  } finally {
    isolate.hostCalls.drop(key);
    isolate.deliveryFailures.delete(key);
    if (!finished && isolate.healthy()) {
      try {
        isolate.call('httpDrop', [key]);
      } catch {
        // the isolate will be rebuilt by the caller if it is unusable
      }
    }
  }
}

/** Resolves when `activity` does or `ms` passed, whichever comes first. */
const waitUntil = async (activity: Promise<void>, ms: number): Promise<void> => {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([activity, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  } finally {
    clearTimeout(timer);
  }
};
