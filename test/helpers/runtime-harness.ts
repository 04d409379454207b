/**
 * An InstanceRuntime in process, for the runtime's direct tests (test/runtime-*.test.ts): the scripted
 * fake sandbox (fake-sandbox.ts), a real LMDB store in a temporary directory, and a clock the test
 * moves by hand (the settle loop's waits move it too, so a 10 s budget runs out in microseconds).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../src/domain/clock.js';
import type { MigrationEdge } from '../../src/domain/migration-path.js';
import type { JsonObject } from '../../src/domain/machine-state.js';
import { InstanceRuntime } from '../../src/runtime/instance-runtime.js';
import { LogSink } from '../../src/runtime/log-sink.js';
import { defaultRuntimeSettings, type RuntimeSettings } from '../../src/runtime/runtime-settings.js';
import type { MigrationInput, MigrationOutput } from '../../src/sandbox/version-isolate.js';
import type { NodeStore } from '../../src/store/catalog.js';
import { openLmdbNodeStore } from '../../src/store/lmdb/lmdb-node-store.js';
import { FakeSandboxes, type FakeMachine } from './fake-sandbox.js';

/** A clock that moves only when told, or when the runtime sleeps on it. */
export class ManualClock implements Clock {
  constructor(public ms = 1_700_000_000_000) {}
  now(): number {
    return this.ms;
  }
  async sleep(ms: number): Promise<void> {
    this.ms += ms;
    await Promise.resolve();
  }
}

/** A service log line about an instance, as the runtime wrote it. */
interface ServiceLine {
  instance: string;
  level: string;
  message: string;
}

class CapturedLogs extends LogSink {
  readonly lines: ServiceLine[] = [];
  override service(
    orgId: string,
    machine: string,
    instance: string,
    level: 'info' | 'warn' | 'error',
    message: string,
    fields: Record<string, unknown> = {},
    versionId?: string,
  ): void {
    this.lines.push({ instance, level, message });
    super.service(orgId, machine, instance, level, message, fields, versionId);
  }
}

const quietLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

interface HarnessOptions {
  /** Machines by version id; the machine `m` of org `org` has them all, the first one current. */
  versions: Record<string, FakeMachine>;
  migrations?: MigrationEdge[];
  /** What each migration does to the instance's paths and context (by default: nothing). */
  migrate?: (migrationId: string, input: MigrationInput) => MigrationOutput;
  settings?: Partial<RuntimeSettings>;
}

export interface RuntimeHarness {
  runtime: InstanceRuntime;
  store: NodeStore;
  sandboxes: FakeSandboxes;
  clock: ManualClock;
  logs: CapturedLogs;
  /** Due times the runtime told the timer scheduler of, in order. */
  timersPending: number[];
  /** Closes the runtime and the store, and removes the store's directory. */
  close(): Promise<void>;
}

export const ORG = 'org_test';
export const MACHINE = 'm';
export const noAuth: JsonObject = {};

export const runtimeHarness = (options: HarnessOptions): RuntimeHarness => {
  const dir = mkdtempSync(join(tmpdir(), 'statehold-runtime-'));
  const store = openLmdbNodeStore(dir);
  const clock = new ManualClock();
  const sandboxes = new FakeSandboxes(options.versions);
  const logs = new CapturedLogs(store.logs, quietLogger);
  const timersPending: number[] = [];
  const versionIds = Object.keys(options.versions);
  const migrations = options.migrations ?? [];
  const runtime = new InstanceRuntime({
    instances: store.instances,
    sandboxes,
    versions: {
      listMigrations: () => migrations,
      getVersion: (_org, _machine, versionId) => (options.versions[versionId] ? { id: versionId } : undefined),
      getVersionCode: (_org, versionId) => (options.versions[versionId] ? `code of ${versionId}` : undefined),
      getMigrationCode: (_org, migrationId) => migrationId,
    },
    machines: { getMachine: (_org, slug) => (slug === MACHINE ? { currentVersionId: versionIds[0] as string } : undefined) },
    logs,
    settings: { ...defaultRuntimeSettings, ...options.settings },
    logger: quietLogger,
    clock,
    onTimersPending: (dueAt) => void timersPending.push(dueAt),
    // (the migration's code, as the fake version source gives it, is its id)
    migrate: (code, input) => Promise.resolve(options.migrate?.(code, input) ?? input),
  });
  return {
    runtime,
    store,
    sandboxes,
    clock,
    logs,
    timersPending,
    async close() {
      await runtime.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

/** The event types of the instance's history, oldest first. */
export const historyOf = (harness: RuntimeHarness, name: string): string[] =>
  harness.store.instances.listTransitions(ORG, MACHINE, name, 0, 1_000).map((record) => record.event.type);
