/**
 * Per-isolate limits of the sandbox, in one place. The in-isolate code (isolate/globals.js) gets them
 * as values when an isolate is made (isolate-sources.ts isolateSettings), so host and isolate agree.
 * (CPU time and memory limits per isolate are load options: version-loading.ts DEFAULT_*.)
 */

/**
 * Console output captured per call into the isolate (one harness entry such as start, send, advance,
 * authorize or deliver, with the microtasks it drains; or the bundle's top-level code). Past either
 * budget the rest of the call's entries are dropped and ONE summary entry ("console output
 * truncated: N entries dropped") follows the call. Enforced inside the isolate (cheap: no
 * serialisation once over) and again by the host's log callback (host-callbacks.ts LogBudget), so
 * machine code tampering with the in-isolate emitter cannot flood the host.
 */
export const MAX_LOG_ENTRIES_PER_CALL = 200;
/** Characters of entry JSON per call (≈ bytes for ASCII). */
export const MAX_LOG_CHARS_PER_CALL = 256 * 1024;
/** Characters of one entry's JSON; a longer entry has its arguments replaced by a truncated string. */
export const MAX_LOG_ENTRY_CHARS = 64 * 1024;

/** Pending timers (setTimeout/setInterval callbacks and delayed events) per owner (actor key, or none). */
export const MAX_TIMERS_PER_OWNER = 10_000;
/**
 * Pending delayed events (`after`, delayed `send`) per actor: they are persisted with the instance,
 * so they are bounded much lower. Scheduling one more throws inside machine code (the step fails).
 */
export const MAX_EVENT_TIMERS_PER_OWNER = 1_000;

/** Longest step result (collect's JSON) the host accepts; larger fails the step with MachineCodeError. */
export const MAX_STEP_RESULT_CHARS = 8 * 1024 * 1024;
