/**
 * Event types the runtime and xstate make for themselves, which a client may not send. Sent from
 * outside, each would skip the machine's own logic: `xstate.after(…)` fires a delay before its time,
 * `done.invoke.<id>` / `error.platform.<id>` fake what an invoked service returned, `statebacked.upgrade`
 * forges an upgrade record in the history (wire-protocol §5.4). xstate 5's own are all `xstate.…`.
 */
const RESERVED_PREFIXES = ['xstate.', 'done.invoke.', 'done.state.', 'error.platform.', 'statebacked.'] as const;
/** xstate 4's own, as whole names (`error.execution` of a failed action, and what follows a dot). */
const RESERVED_NAMES = ['error.execution', 'error.communication'] as const;

const reservedPrefixOf = (type: string): string | undefined =>
  RESERVED_PREFIXES.find((prefix) => type.startsWith(prefix)) ??
  RESERVED_NAMES.find((name) => type === name || type.startsWith(`${name}.`));

/** Why a client (or an http API's handler, passing on its caller's) may not send an event of `type`, if it may not. */
export const reservedEventProblem = (type: string): string | undefined => {
  const reserved = reservedPrefixOf(type);
  if (reserved === undefined) return undefined;
  return `event types beginning with ${reserved} are the runtime's own (${[...RESERVED_PREFIXES, ...RESERVED_NAMES].join(', ')}); a client may not send them`;
};

/**
 * Why an event object cannot be taken as sent, if it cannot: xstate 4 takes one with `$$type: "scxml"`
 * as its own wrapped event and acts on its `name`, not its `type`, so such an event would pass the
 * authorizer and the reserved-type check under one type and run as another.
 */
export const eventShapeProblem = (event: object): string | undefined =>
  (event as { $$type?: unknown }).$$type === 'scxml'
    ? 'an event may not have $$type "scxml": xstate 4 would take it as its own wrapped event and act on its name, not its type'
    : undefined;

/** Why a client (or an http API's handler) may not send this event, whose type is a non-empty string, if it may not. */
export const clientEventProblem = (event: { type: string }): string | undefined =>
  reservedEventProblem(event.type) ?? eventShapeProblem(event);
