/**
 * What InstanceRuntime is made of (instance-runtime.ts): its dependencies, and the pieces of state its
 * parts share (the actors with their mailboxes, the usage meter, the machine gate, ...). Each part of
 * the owner side (instance-creation.ts, event-delivery.ts, message-receipt.ts, timer-firing.ts,
 * head-changes.ts) is given these and nothing else.
 */
import type { Clock } from '../domain/clock.js';
import type { Logger } from '../domain/logger.js';
import type { CapturedLog, MigrationInput, MigrationOutput } from '../sandbox/index.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { ActorRegistry } from './actor-registry.js';
import type { HeadIndexer } from './index-values.js';
import type { LogSink } from './log-sink.js';
import type { MachineGate } from './machine-gate.js';
import type { RequestRetries } from './request-retries.js';
import type { RuntimeSettings } from './runtime-settings.js';
import type { RuntimeSandboxes } from './runtime-sandboxes.js';
import type { UpdateBus } from './update-bus.js';
import type { UsageMeter } from './usage-meter.js';
import type { VersionSource } from './version-source.js';

/** Where the runtime reports what GET /metrics counts on its hot path: each call O(1) (bin/node-metrics.ts). */
export interface RuntimeMeters {
  /** A commit (a create's included) of `records` transition records took `seconds` to become durable. */
  committed(records: number, seconds: number): void;
}

/** Points where tests may stop the process to prove crash safety (see bin/fault-hooks.ts). */
export type FaultPoint = 'after-sender-commit' | 'after-receiver-commit';

export interface InstanceRuntimeDeps {
  instances: InstanceStore;
  /** The loaded machine versions: the node's SandboxPool, or a test's fake (runtime-sandboxes.ts). */
  sandboxes: RuntimeSandboxes;
  versions: VersionSource;
  /** The machine catalog: current versions, for instances created by other instances. */
  machines: { getMachine(orgId: string, slug: string): { currentVersionId?: string } | undefined };
  logs: LogSink;
  settings: RuntimeSettings;
  logger: Logger;
  /** Told the earliest due time of an instance's pending timers after each commit (the timer scheduler). */
  onTimersPending?: (earliestDueAt: number) => void;
  /** Told when a commit left messages in the outbox (the outbox dispatcher). */
  onOutbox?: () => void;
  /** Where every durable commit (and deletion) is published, in commit order per instance. */
  updates?: UpdateBus;
  fault?: (point: FaultPoint) => void;
  meters?: RuntimeMeters;
  /** Where the runtime reads the time (the system's by default; tests move their own). */
  clock?: Clock;
  /** Runs one migration of an upgrade (a migration bundle, in a sandbox worker); what its code logs goes to `onLog`. */
  migrate: (code: string, input: MigrationInput, onLog: (entry: CapturedLog) => void) => Promise<MigrationOutput>;
}

/** The state the runtime's parts share; made once, by InstanceRuntime's constructor. */
export interface RuntimeParts {
  deps: InstanceRuntimeDeps;
  clock: Clock;
  actors: ActorRegistry;
  usage: UsageMeter;
  gate: MachineGate;
  indexer: HeadIndexer;
  /** Requests run again when what failed under them was not their fault (request-retries.ts). */
  retries: RequestRetries;
}
