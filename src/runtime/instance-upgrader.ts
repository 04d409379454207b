/**
 * The lazy upgrade's work before its commit (wire-protocol §8.5): the migration chain from the
 * instance's version to its desired one, run on its leaf paths, the paths its history states remember
 * and its context; the instance started from the migrated snapshot on the new version; the upgrade
 * record and the head it leads to. The runtime commits it (lazy-upgrade.ts) like any
 * other commit, in the instance's mailbox.
 */
import type { Clock } from '../domain/clock.js';
import { noMigrationPath, notFound } from '../domain/errors.js';
import type { MachineEvent } from '../domain/machine-state.js';
import { migrationPath } from '../domain/migration-path.js';
import { type CapturedLog, type MigrationInput, type MigrationOutput, restoredSnapshot } from '../sandbox/index.js';
import type { InstanceHead, TransitionRecord } from '../store/instance-store.js';
import { checkedSize, headStateOf, keptTimerAttempts, stampTimes } from './commit-records.js';
import type { InstanceActor } from './instance-actor.js';
import type { LogSink } from './log-sink.js';
import type { RuntimeSandboxes } from './runtime-sandboxes.js';
import { leafPaths, rememberedPaths, upgradedSnapshot, valueOfPaths } from './upgrade-state.js';
import type { VersionSource } from './version-source.js';

interface UpgraderDeps {
  versions: VersionSource;
  sandboxes: Pick<RuntimeSandboxes, 'get'>;
  logs: LogSink;
  clock: Clock;
  limits: { maxContextBytes: number; maxPersistedBytes: number };
  /** Runs one migration (a migration bundle, in a sandbox worker); what its code logs goes to `onLog`. */
  migrate: (code: string, input: MigrationInput, onLog: (entry: CapturedLog) => void) => Promise<MigrationOutput>;
  /** The head's index values under the new version's selectors. */
  index: (head: InstanceHead) => InstanceHead;
}

/** An upgrade ready to commit: its one record, the head it leads to, the sizes of its state. */
interface UpgradePlan {
  records: TransitionRecord[];
  next: InstanceHead;
  size: { contextBytes: number; stateBytes: number };
  migrationIds: string[];
}

export class InstanceUpgrader {
  constructor(private readonly deps: UpgraderDeps) {}

  /**
   * The upgrade of `head` to its desired version, started live in that version's sandbox (the actor
   * is left live there). Throws what a migration or the start threw; nothing is written.
   */
  async plan(actor: InstanceActor, head: InstanceHead, target: string): Promise<UpgradePlan> {
    const { orgId, machine, name } = actor;
    const from = head.versionId;
    const chain = migrationPath(this.deps.versions.listMigrations(orgId, machine), from, target);
    if (!chain) throw noMigrationPath(from, target);
    const old = restoredSnapshot(head.snapshot, head.state, head.context);
    // A v5 history names state nodes by id: the old version's machine turns them into paths.
    const remembered =
      old.xstate === 5
        ? await (await this.deps.sandboxes.get(orgId, machine, from)).rememberedPaths5(old)
        : rememberedPaths(old.state.historyValue);
    let step: MigrationInput = { paths: leafPaths(head.state), remembered, context: head.context };
    for (const hop of chain) {
      const code = this.deps.versions.getMigrationCode(orgId, hop.migrationId);
      if (code === undefined) throw notFound(`migration ${hop.migrationId} has no code`);
      // (its console output is the instance's, filed under the version it upgrades to)
      step = await this.deps.migrate(code, step, (entry) =>
        this.deps.logs.captured(orgId, machine, { ...entry, versionId: target, machineInstanceName: name }),
      );
    }
    const value = valueOfPaths(step.paths);
    const sandbox = await this.deps.sandboxes.get(orgId, machine, target);
    actor.discardLive();
    const now = this.deps.clock.now();
    const result = await sandbox.start(
      actor.key,
      { snapshot: upgradedSnapshot(old, value, step.context, step.remembered), pendingTimers: head.pendingTimers },
      { machineInstanceName: name, nowMs: now },
    );
    actor.sandbox = sandbox;
    const size = checkedSize(result, this.deps.limits);
    const migrationIds = chain.map((hop) => hop.migrationId);
    const event: MachineEvent = {
      type: 'statebacked.upgrade',
      migrationPath: migrationIds,
      fromMachineVersionId: from,
      toMachineVersionId: target,
    };
    const records: TransitionRecord[] = [{ seq: head.seq + 1, createdAt: '', ts: now, event, state: result.state }];
    stampTimes(records, head.ts);
    const { targetVersionId: _reached, ...rest } = head;
    const state = headStateOf(result);
    const timerAttempts = keptTimerAttempts(head.timerAttempts, state.pendingTimers);
    // (indexed by the new version's selectors: an upgrade is one index write per index it changes)
    const next = this.deps.index({
      ...rest,
      versionId: target,
      seq: head.seq + 1,
      ts: (records[0] as TransitionRecord).ts,
      ...state,
      timerAttempts,
    });
    return { records, next, size, migrationIds };
  }
}
