/**
 * A step's snapshot leaves out the state value and context, which the head keeps beside it (heads
 * are written on every commit); a marker in it says which were left out. Before an actor is rebuilt
 * from a stored head, they are put back. Heads stored before snapshots became text hold the snapshot
 * as an object, in the same form. (A restore riding on a step's call, types.ts Restore, carries the
 * text with the value and context beside it, and the harness puts them back in the isolate.)
 */
import type { JsonObject, MachineEvent, PersistedSnapshot, StateValue } from './types.js';

const FROM_HEAD = '__fromHead';

/** The full snapshot to start an actor from: the stored one with the head's value and context back in. */
export const restoredSnapshot = (stored: string | PersistedSnapshot, value: StateValue, context: JsonObject): PersistedSnapshot => {
  const snapshot = typeof stored === 'string' ? (JSON.parse(stored) as PersistedSnapshot) : stored;
  const marker = snapshot.state[FROM_HEAD] as { value: boolean; context: boolean } | undefined;
  if (!marker) return snapshot;
  const { [FROM_HEAD]: _marker, ...rest } = snapshot.state;
  return { ...snapshot, state: { ...rest, value, ...(marker.context ? { context } : {}) } };
};

/** The xstate major a stored snapshot belongs to (the harness writes the marker first). */
const xstateMajorOf = (stored: string | PersistedSnapshot): 4 | 5 => {
  if (typeof stored !== 'string') return stored.xstate === 5 ? 5 : 4;
  if (stored.startsWith('{"xstate":')) return stored.startsWith('{"xstate":5') ? 5 : 4;
  return (JSON.parse(stored) as PersistedSnapshot).xstate === 5 ? 5 : 4;
};

/**
 * The event a machine is given, before its next event, for a child the runtime stopped when the
 * machine did not settle in time (wire-protocol §8.1): the error event of its xstate major.
 */
export const childStoppedEvent = (stored: string | PersistedSnapshot, childId: string): MachineEvent => {
  const message = `child ${childId} was stopped: the machine did not settle in time`;
  return xstateMajorOf(stored) === 5
    ? { type: `xstate.error.actor.${childId}`, error: { message } }
    : { type: `error.platform.${childId}`, data: { message } };
};
