/**
 * Event types the runtime and xstate make for themselves, which a client may not send. Sent from
 * outside, each would skip the machine's own logic: `xstate.after(…)` fires a delay before its time,
 * `done.invoke.<id>` / `error.platform.<id>` fake what an invoked service returned, `statebacked.upgrade`
 * forges an upgrade record in the history (wire-protocol §5.4). xstate 5's own are all `xstate.…`.
 */
const RESERVED_PREFIXES = ['xstate.', 'done.invoke.', 'done.state.', 'error.platform.', 'error.execution', 'error.communication', 'statebacked.'] as const;

/** The reserved prefix `type` begins with, if any. */
export const reservedEventPrefix = (type: string): string | undefined => RESERVED_PREFIXES.find((prefix) => type.startsWith(prefix));

export const RESERVED_EVENT_PREFIXES: readonly string[] = RESERVED_PREFIXES;
