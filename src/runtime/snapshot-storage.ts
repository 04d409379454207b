import type { JsonObject, PersistedSnapshot, StateValue } from '../domain/machine-state.js';

/**
 * The head keeps the state value and context beside the snapshot, which repeats them. Heads are
 * written on every commit, so the snapshot is stored without its copies (a marker says so) and they
 * are put back before the actor is rebuilt from it.
 */
const FROM_HEAD = '__fromHead';

export const withoutHeadCopies = (snapshot: PersistedSnapshot): PersistedSnapshot => {
  const { value: _value, context, ...rest } = snapshot.state;
  const contextInHead = context !== undefined && context !== null;
  return { ...snapshot, state: { ...rest, ...(contextInHead || context === undefined ? {} : { context }), [FROM_HEAD]: { value: true, context: contextInHead } } };
};

export const withHeadCopies = (snapshot: PersistedSnapshot, value: StateValue, context: JsonObject): PersistedSnapshot => {
  const marker = snapshot.state[FROM_HEAD] as { value: boolean; context: boolean } | undefined;
  if (!marker) return snapshot;
  const { [FROM_HEAD]: _marker, ...rest } = snapshot.state;
  return { ...snapshot, state: { ...rest, value, ...(marker.context ? { context } : {}) } };
};
