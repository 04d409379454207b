/**
 * The JSON shapes of a machine's state that cross layers: the sandbox produces them, the store keeps
 * them, the API returns parts of them. Plain JSON only.
 */

/** XState v4 state value: a leaf name, or nested objects whose leaves are strings. */
export type StateValue = string | { [region: string]: StateValue };

export type JsonObject = { [key: string]: unknown };

/** Machine event in object form (wire-protocol §5): `{ type, ...payload }`. */
export interface MachineEvent extends JsonObject {
  type: string;
}

/**
 * What is needed to rebuild exactly this state: the v4 State JSON (value, context, historyValue,
 * _event, activities, ...) with `actions`, `children` and `history` emptied so that rehydrating never
 * re-runs side effects that already ran; for a v5 machine, its persisted snapshot's status, output,
 * value, context and historyValue, without children. Pending delayed events are NOT inside: they are listed in
 * `StepResult.pendingTimers` and must be handed back to `start` (see version-isolate.ts).
 */
export interface PersistedSnapshot {
  /** The xstate major the state belongs to: 4 (State JSON) or 5 (persisted snapshot: status, output, historyValue). */
  xstate: 4 | 5;
  state: JsonObject;
  /** Persistent children started by `persistentInvocableSource` invokes, by invoke id (for sendTo). */
  invokes?: Record<string, PersistentActorRef>;
  /** v5: the xstate source name of each of those invokes, to bring its actor back on a restore. */
  invokeSources?: Record<string, string>;
}

/** A host-clock timer still scheduled for an instance. */
export type PendingTimer =
  | {
      kind: 'event';
      id: string;
      dueAt: number;
      /** The delayed event (an `after` event or a delayed `send`). */
      event: MachineEvent;
      /** xstate send id (what `cancel(id)` uses); for `after` it is the after-event type. */
      sendId?: string;
      /** Target of a delayed `sendTo`: a child id, `#_parent`, or a persistent instance ref. */
      to?: string | PersistentActorRef;
    }
  | {
      /** A `setTimeout`/`setInterval` made by machine code (e.g. inside an invoked promise). Not persistable. */
      kind: 'callback';
      id: string;
      dueAt: number;
    };

export interface PersistentActorRef {
  type: 'statebacked.instance';
  id?: string;
  machineName: string;
  machineInstanceName: string;
}
