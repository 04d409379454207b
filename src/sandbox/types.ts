/**
 * Shapes that cross the sandbox boundary. Everything here is plain JSON: the in-isolate harness
 * serialises with JSON.stringify and the host parses, so no object identity or prototype from the
 * isolate ever reaches the host.
 */

import type { JsonObject, MachineEvent, PendingTimer, PersistedSnapshot, PersistentActorRef, StateValue } from '../domain/machine-state.js';

export type { JsonObject, MachineEvent, PendingTimer, PersistedSnapshot, PersistentActorRef, StateValue } from '../domain/machine-state.js';
export type { MachineDefinition } from '../domain/machine-definition.js';

/** A `spawnPersistentInstance` (or `persistentInvocableSource` invoke) the runtime must carry out after commit. */
export interface PersistentSpawnRequest {
  kind: 'spawn' | 'invoke';
  id: string;
  machineName: string;
  machineInstanceName: string;
  machineVersionId?: string;
  context?: JsonObject;
}

/** An event addressed to another instance (`sendTo(persistentRef, ...)`) or to the persistent parent (`sendParent`). */
export interface OutboundSend {
  to: PersistentActorRef | 'parent';
  event: MachineEvent;
}

export interface RunningChild {
  id: string;
  kind: 'promise' | 'callback' | 'machine' | 'observable' | 'behavior' | 'actor';
}

export interface StepResult {
  state: StateValue;
  context: JsonObject;
  tags: string[];
  done: boolean;
  /** At least one macrostep during this call changed something (value, context or actions). */
  changed: boolean;
  /** JSON of the snapshot, without the value and context (see snapshot.ts); stored as it is. */
  snapshot: string;
  pendingTimers: PendingTimer[];
  runningChildren: RunningChild[];
  persistentSpawns: PersistentSpawnRequest[];
  outboundSends: OutboundSend[];
  /** Macrosteps taken during this call (including ones caused by promises resolving meanwhile). */
  transitions: number;
  /** Measured on the JSON texts the harness produced (see step-result.ts). */
  sizes: StepSizes;
  /**
   * Host calls (fetches) started by this actor and still in flight. Their outcomes arrive outside any
   * step (see VersionIsolate.nextActivity); an actor with calls in flight has not settled.
   */
  pendingHostCalls: number;
}

export type LogLevel = 'log' | 'info' | 'warn' | 'error' | 'debug';

export interface CapturedLog {
  level: LogLevel;
  /** JSON-safe copies of the console arguments (objects stay objects). */
  args: unknown[];
  /** Host clock, ms since epoch. */
  timestamp: number;
  versionId: string;
  /** The actor key the code ran for, when it ran inside an actor call. */
  instanceKey?: string;
  machineInstanceName?: string;
}

export interface ReadRequest {
  machineInstanceName: string;
  state: StateValue;
  context: JsonObject;
  authContext: JsonObject;
}

/** One state checked with allowRead for several auth contexts (the realtime subscribers' groups). */
export interface ReadManyRequest {
  machineInstanceName: string;
  state: StateValue;
  context: JsonObject;
  authContexts: JsonObject[];
}

export type WriteRequest =
  | { type: 'initialization'; machineInstanceName: string; context: JsonObject; authContext: JsonObject }
  | {
      type: 'event';
      machineInstanceName: string;
      state: StateValue;
      context: JsonObject;
      event: MachineEvent;
      authContext: JsonObject;
    };

export type StartInit =
  /** Fresh instance: `context` is shallow-merged over the machine's default context. */
  | { context: JsonObject }
  /** Rehydrate: no entry actions re-run; `pendingTimers` (event kind) are re-armed with their dueAt. */
  | { snapshot: PersistedSnapshot; pendingTimers?: PendingTimer[] };

/**
 * An actor's committed snapshot, handed to a step call when the actor is not live in the isolate (it
 * was evicted, or the isolate is new): restored in the same call, as `start` would.
 */
export interface Restore {
  name: string;
  /**
   * As the head stores it: the step's snapshot text, which leaves out the value and context (below)
   * and says so (snapshot.ts), or a full snapshot. Passed on as text: parsed once, in the isolate.
   */
  snapshot: string | PersistedSnapshot;
  value: StateValue;
  context: JsonObject;
  pendingTimers?: PendingTimer[];
}

export interface StartOptions {
  /** The instance's name, used in captured logs (defaults to the key). */
  machineInstanceName?: string;
  /** Host-clock "now" used as the base of new timers (defaults to Date.now()). */
  nowMs?: number;
}

/** Who asks for a write, for an authorizer that reads the rest of its request from the live actor. */
export interface AuthorizingCaller {
  machineInstanceName: string;
  authContext: JsonObject;
}

/** Sizes of a step's result as JSON, measured where it was produced (the sandbox worker). */
export interface StepSizes {
  contextBytes: number;
  /** The snapshot and the pending timers: what a commit persists besides the context. */
  restBytes: number;
}

/** The request an http API handler gets (wire-protocol §3.14): the body already parsed by its content type. */
export interface HttpApiRequest {
  method: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  body: unknown;
}

/**
 * What a responseMapper is run with: the settled instance; the harness turns `done` and `event` into
 * the `result` the mapper gets (the top-level final state's data, else null).
 */
export interface HttpApiSettled {
  machineInstanceName: string;
  state: StateValue;
  context: JsonObject;
  done: boolean;
  /** The event that was sent (xstate 4 computes a final state's data from the event that reached it). */
  event: MachineEvent;
}

/**
 * How a call of an httpApiMapper entry ended: it returned (a JSON copy; undefined when it returned
 * nothing), it threw (or did not finish in time), or the version has no such entry.
 */
export type HttpApiOutcome =
  { kind: 'returned'; value: unknown } | { kind: 'threw'; message: string } | { kind: 'missing'; message: string };
