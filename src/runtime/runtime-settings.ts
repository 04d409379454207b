import { defaultEgressOptions, type EgressOptions } from '../sandbox/index.js';

/** Knobs of the actor runtime; the process entry point fills them from configuration. */
export interface RuntimeSettings {
  /** How long create/send wait for a machine to settle (wire-protocol §8.1). */
  settleBudgetMs: number;
  /** Largest context, as UTF-8 JSON, a transition may leave behind. */
  maxContextBytes: number;
  /** Largest persisted state besides the context: the snapshot plus pending delayed events. */
  maxPersistedBytes: number;
  /** What machine code may use in one call into its version's isolate, beyond what the live actors hold. */
  isolateMemoryLimitMb: number;
  /**
   * What a version's live actors may hold of its isolate's heap; beyond, its least recently used ones
   * are evicted (worker/live-heap-watch.ts). The isolate's heap limit is this plus isolateMemoryLimitMb.
   */
  liveActorMemoryMb: number;
  /** Time one call into machine code may run (isolated-vm times it on the clock, not the thread's CPU). */
  cpuLimitMs: number;
  /** Live actors kept in memory; idle ones beyond either bound are evicted, least recently used first. */
  maxLiveActors: number;
  maxLiveActorBytes: number;
  /** Live actors no request took for this long are evicted, and versions none of them is on are unloaded. */
  idleUnloadMs: number;
  /** A delayed event whose delivery failed is tried again after this long... */
  timerRetryDelayMs: number;
  /** ...at most this many times, then dropped with a log line saying why (wire-protocol §8.2). */
  timerMaxRetries: number;
  /** Where machine code's fetch may go, its time limit and its response size limit. */
  egress: EgressOptions;
  /**
   * Instances machine code may make per org per second (spawns, sends that create their target), with
   * ten times as many in a burst; beyond, their creation is retried later like any failed delivery.
   */
  madeInstancesPerSecond: number;
  /**
   * Actors of machines that can leave nothing running but delayed events to themselves rest between
   * steps as their state and timers alone, stepped by xstate's pure transition instead of a live
   * interpreter (isolate/harness-pure-steps.js).
   */
  pureSteps: boolean;
  /** Requests to http APIs (wire-protocol §3.14) per org per second, with twice as many in a burst; beyond, 429. */
  httpApiRequestsPerSecond: number;
}

export const defaultRuntimeSettings: RuntimeSettings = {
  settleBudgetMs: 10_000,
  maxContextBytes: 400 * 1024,
  maxPersistedBytes: 2 * 1024 * 1024,
  isolateMemoryLimitMb: 128,
  liveActorMemoryMb: 128,
  cpuLimitMs: 1_000,
  maxLiveActors: 20_000,
  maxLiveActorBytes: 256 * 1024 * 1024,
  idleUnloadMs: 600_000,
  timerRetryDelayMs: 30_000,
  timerMaxRetries: 5,
  egress: defaultEgressOptions,
  madeInstancesPerSecond: 50,
  pureSteps: true,
  httpApiRequestsPerSecond: 100,
};
