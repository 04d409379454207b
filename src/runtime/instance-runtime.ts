import { type Clock, systemClock } from '../domain/clock.js';
import {
  conflict,
  machineCodeFailed,
  noMigrationPath,
  notFound,
  rejectedByAuthorizer,
  ServiceError,
  unavailable,
} from '../domain/errors.js';
import type { Logger } from '../domain/logger.js';
import { migrationPath } from '../domain/migration-path.js';
import type { JsonObject, MachineEvent, PendingTimer } from '../domain/machine-state.js';
import {
  type CapturedLog,
  childStoppedEvent,
  type LiveHeapReport,
  type MigrationInput,
  type MigrationOutput,
  type Restore,
  type WorkerStats,
  type RemoteVersion,
  type StepResult,
} from '../sandbox/index.js';
import {
  type CommitEffects,
  type InstanceHead,
  type InstanceStatus,
  type InstanceStore,
  type OutboxMessage,
  SequenceConflictError,
  type TransitionRecord,
  type UsageMonth,
} from '../store/instance-store.js';
import { changedIndexes } from '../domain/index-values.js';
import { ActorRegistry } from './actor-registry.js';
import { billedTransitions, checkedSize, headStateOf, keptTimerAttempts, stampTimes } from './commit-records.js';
import { HeadIndexer } from './index-values.js';
import { type InstanceActor, liveActorsIn } from './instance-actor.js';
import type { LogSink } from './log-sink.js';
import { MachineGate } from './machine-gate.js';
import { TokenBuckets } from './rate-limit.js';
import { outboxMessages } from './outbox-messages.js';
import type { RuntimeSettings } from './runtime-settings.js';
import type { SandboxPool } from './sandbox-pool.js';
import { isSettled, settle } from './settle.js';
import { InstanceUpgrader } from './instance-upgrader.js';
import { asRequestError, RequestRetries } from './request-retries.js';
import { StepEffects } from './step-effects.js';
import { timerRetryPlan } from './timer-retries.js';
import { UsageMeter } from './usage-meter.js';
import type { CreateRequest } from '../domain/instance-requests.js';
import { type UpdateBus, updateOf } from './update-bus.js';
import { InvalidUpgradePathError } from './upgrade-state.js';
import type { VersionSource } from './version-source.js';

interface RuntimeStats {
  node: { rssBytes: number; heapUsedBytes: number };
  actors: { held: number; live: number; maxHeld: number };
  sandboxWorkers: { main: WorkerStats | null; quarantine: WorkerStats | null };
}

/** Points where tests may stop the process to prove crash safety (see bin/fault-hooks.ts). */
export type FaultPoint = 'after-sender-commit' | 'after-receiver-commit';

interface InstanceRuntimeDeps {
  instances: InstanceStore;
  sandboxes: SandboxPool;
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
  /** Where the runtime reads the time (the system's by default; tests move their own). */
  clock?: Clock;
  /** Runs one migration of an upgrade (a migration bundle, in a sandbox worker); what its code logs goes to `onLog`. */
  migrate: (code: string, input: MigrationInput, onLog: (entry: CapturedLog) => void) => Promise<MigrationOutput>;
}

type EventTimer = Extract<PendingTimer, { kind: 'event' }>;

/** A delayed event that fired while a step settled, and the state the machine was in when the next came. */
interface FiredTimer {
  event: MachineEvent;
  result: StepResult;
  /** When it was applied (the runtime's clock): the settle loop waits for real until each one is due. */
  appliedAt: number;
}

/** A settled step: its final result, the children stopped at the timeout, the delayed events fired. */
interface Settled {
  result: StepResult;
  stoppedChildren: string[];
  fired: FiredTimer[];
  /** The state before the first of `fired` (present when one fired). */
  beforeFired?: StepResult;
}

/** What a timer wake-up found. */
export type TimerFiring = 'fired' | 'retry-later' | 'dropped' | 'nothing-due';

export type { CreateRequest } from '../domain/instance-requests.js';

interface Creation extends CreateRequest {
  parent?: { machine: string; name: string };
  receivedMessageId?: string;
  /** How many instances in a row, each made by the one before, led to this one (see MAX_MADE_DEPTH). */
  madeDepth?: number;
}

/**
 * Instances that machine code makes (a persistent spawn, or a message to an instance that does not
 * exist yet) may make others in turn, without end: a machine that spawns a child of its own kind on
 * entry made ≈ 240 instances a second until its version was replaced. Chains are cut at this depth.
 */
const MAX_MADE_DEPTH = 100;

/** One input of a request and what its history record says it was. */
/** `restore` is given to the first input of a step whose actor is not live in the sandbox (see transition). */
type Input = {
  event: MachineEvent;
  requestId?: string;
  run: (sandbox: RemoteVersion, key: string, restore: Restore | undefined) => Promise<StepResult>;
};

/** How far back in an instance's history a retried request is looked for (it is retried within seconds). */
const REQUEST_LOOKBACK = 100;
/** How long a node keeps a machine's create gate closed for a deletion another node runs, should that node never open it. */
const MACHINE_GATE_HOLD_MS = 30_000;

const INIT_EVENT: MachineEvent = { type: 'xstate.init' };

/**
 * How many actors may stay live in a version whose live actors hold `heldBytes` of its isolate, over
 * their budget: as many as would hold three quarters of it if each held the same (what the heap holds
 * includes garbage not yet collected, so this errs on the side of evicting).
 */
export const liveActorCap = (live: number, heldBytes: number, budgetBytes: number): number =>
  heldBytes <= 0 ? live : Math.floor((live * 0.75 * budgetBytes) / heldBytes);

/**
 * The owner side of instances: every write goes through the instance's mailbox, runs in its version's
 * isolate, settles, and is answered only once its transition record is durable. Reads use the last
 * committed head and never wait for the mailbox.
 */
export class InstanceRuntime {
  private readonly actors: ActorRegistry;
  private readonly usage: UsageMeter;
  private readonly gate = new MachineGate();
  /** Instances machine code made, per org (see receive). */
  private readonly madeInstances: TokenBuckets;
  private readonly indexer: HeadIndexer;
  /** Requests run again when what failed under them was not their fault (request-retries.ts). */
  private readonly retries: RequestRetries;
  private readonly upgrader: InstanceUpgrader;
  private readonly clock: Clock;

  constructor(private readonly deps: InstanceRuntimeDeps) {
    this.clock = deps.clock ?? systemClock;
    this.retries = new RequestRetries({
      logger: deps.logger,
      quarantineVersion: (versionId) => deps.sandboxes.quarantineVersion(versionId, 'crash'),
    });
    this.actors = new ActorRegistry(deps.settings.maxLiveActors, deps.settings.maxLiveActorBytes);
    this.usage = new UsageMeter(deps.instances, deps.logger);
    this.indexer = new HeadIndexer(deps.versions);
    this.upgrader = new InstanceUpgrader({ ...deps, clock: this.clock, limits: deps.settings, index: (head) => this.indexer.index(head) });
    this.madeInstances = new TokenBuckets(deps.settings.madeInstancesPerSecond, deps.settings.madeInstancesPerSecond * 10);
  }

  /** The committed head, from memory when the actor is held (and the store has none later), else from the store. */
  head(orgId: string, machine: string, name: string): InstanceHead | undefined {
    const held = this.actors.peek(orgId, machine, name)?.head;
    if (held && this.deps.instances.isCurrent?.(held) !== false) return held;
    return this.deps.instances.getInstance(orgId, machine, name);
  }

  /**
   * Inside the actor's mailbox, before its held head is used: a head the store has a later one of
   * (a cluster node's copy got another node's commits, after a pause or while another node owned the
   * instance) is dropped, with the live interpreter, and the store's is loaded in its place.
   */
  private dropStaleHead(actor: InstanceActor): void {
    if (actor.head && this.deps.instances.isCurrent?.(actor.head) === false) {
      actor.head = undefined;
      actor.discardLive();
    }
  }

  async create(request: CreateRequest): Promise<InstanceHead> {
    const { orgId, machine, name } = request;
    const existing = this.head(orgId, machine, name);
    if (existing && request.requestId !== undefined && this.createdBy(existing, request.requestId)) return existing;
    if (existing) throw conflict(`instance ${name} of machine ${machine} already exists`);
    const actor = this.actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      try {
        return await this.retries.afterCrashOnceMore(
          () => this.createWithin(actor, request),
          () => request.versionId,
        );
      } finally {
        if (!actor.head) this.actors.release(actor);
      }
    });
  }

  /** allowRead against the committed state (wire-protocol §3.4); counts one read. */
  async read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceHead> {
    const head = this.head(orgId, machine, name);
    if (!head) throw notFound(`instance ${name} of machine ${machine} does not exist`);
    const allowed = await this.retries.untilNotMoved(async () => {
      const sandbox = await this.deps.sandboxes.get(orgId, machine, head.versionId);
      return this.guard(
        sandbox.allowRead({ machineInstanceName: name, state: head.state, context: head.context, authContext }),
        orgId,
        machine,
        name,
      );
    });
    if (!allowed) throw rejectedByAuthorizer('allowRead');
    this.usage.read(orgId, machine);
    return head;
  }

  /**
   * allowRead of a state that leaves the instance by another way than a read (a realtime push), for
   * several auth contexts in one call into the sandbox: a verdict for each, or the authorizer's failure
   * as a request error. Counts nothing.
   */
  async allowsRead(
    view: {
      orgId: string;
      machine: string;
      name: string;
      versionId: string;
      state: InstanceHead['state'];
      context: InstanceHead['context'];
    },
    authContexts: JsonObject[],
  ): Promise<boolean[]> {
    const { orgId, machine, name } = view;
    return this.retries.untilNotMoved(async () => {
      const sandbox = this.deps.sandboxes.loaded(view.versionId) ?? (await this.deps.sandboxes.get(orgId, machine, view.versionId));
      return this.guard(
        sandbox.allowReads({ machineInstanceName: name, state: view.state, context: view.context, authContexts }),
        orgId,
        machine,
        name,
      );
    });
  }

  /** Counts one read that did not go through `read` (a realtime subscription's first state). */
  countRead(orgId: string, machine: string): void {
    this.usage.read(orgId, machine);
  }

  /** The org's usage by month, newest first (GET /usage). */
  usageMonths(orgId: string, months: number): Promise<UsageMonth[]> {
    return this.usage.months(orgId, months);
  }

  /**
   * Sends an event. A `requestId` is recorded with the event's history record; when the request is a
   * `retry` (a cluster's forwarder asking again after it lost the answer), an event already applied
   * under that id is not applied again: the committed state is answered. So is a run after the head
   * moved under this one (another node applied this very request meanwhile: a stale owner woke up).
   * A first run of a first attempt reads no history.
   */
  send(
    orgId: string,
    machine: string,
    name: string,
    event: MachineEvent,
    authContext: JsonObject,
    requestId?: string,
    retry = false,
  ): Promise<InstanceHead> {
    const actor = this.actors.obtain(orgId, machine, name);
    let runs = 0;
    return actor.enqueue(() =>
      this.retries.afterCrashOnceMore(
        () => {
          const head = this.loadHead(actor);
          const mayBeApplied = retry || runs++ > 0;
          if (mayBeApplied && requestId !== undefined && this.applied(head, requestId)) return Promise.resolve(head);
          return this.deliverEvent(actor, head, event, authContext, {}, requestId);
        },
        () => actor.head?.versionId,
      ),
    );
  }

  /** Whether the instance's first record was written by the create with that id (a retried create). */
  private createdBy(head: InstanceHead, requestId: string): boolean {
    return this.deps.instances.listTransitions(head.orgId, head.machine, head.name, 0, 1)[0]?.requestId === requestId;
  }

  /** Whether one of the instance's latest records applied the request with that id. */
  private applied(head: InstanceHead, requestId: string): boolean {
    const from = Math.max(0, head.seq - REQUEST_LOOKBACK);
    return this.deps.instances
      .listTransitions(head.orgId, head.machine, head.name, from, REQUEST_LOOKBACK)
      .some((record) => record.requestId === requestId);
  }

  /**
   * Applies a message from another instance (wire-protocol §7.4): creates a spawned child, or delivers
   * an event (creating the target with its default context when it does not exist yet). A message this
   * instance already applied (redelivered after a crash) is acknowledged without applying it again.
   */
  receive(message: OutboxMessage): Promise<void> {
    const { orgId } = message;
    const { machine, name } = message.to;
    const actor = this.actors.obtain(orgId, machine, name);
    return actor.enqueue(() =>
      this.retries.untilNotMoved(async () => {
        if (this.deps.instances.hasReceived(orgId, machine, name, message.id)) return;
        const authContext = { stateBackedSender: { machineName: message.from.machine, machineInstanceName: message.from.name } };
        this.dropStaleHead(actor);
        let head = actor.head ?? this.deps.instances.getInstance(orgId, machine, name);
        if (message.kind === 'spawn' && head) {
          await this.deps.instances.markReceived(orgId, machine, name, message.id);
          return;
        }
        const madeDepth = head
          ? 0
          : (message.fromMadeDepth ?? this.head(orgId, message.from.machine, message.from.name)?.madeDepth ?? 0) + 1;
        // Depth alone does not bound a machine that makes two of its own kind: the org's rate does.
        if (!head && !this.madeInstances.take(orgId)) {
          throw unavailable(
            `machine code in this org made more than ${this.deps.settings.madeInstancesPerSecond} instances a second (--made-instances-per-second)`,
          );
        }
        if (madeDepth > MAX_MADE_DEPTH) {
          const what =
            message.kind === 'spawn' ? 'spawn' : `message ${(message.event as MachineEvent | undefined)?.type ?? ''} to a new instance`;
          this.deps.logs.service(
            orgId,
            message.from.machine,
            message.from.name,
            'warn',
            `${what} ${machine}/${name} refused: instances made by instances are limited to ${MAX_MADE_DEPTH} in a row`,
            { machine, instance: name },
          );
          await this.deps.instances.markReceived(orgId, machine, name, message.id);
          return;
        }
        if (message.kind === 'spawn') {
          const versionId = this.versionFor(orgId, machine, message.spawn?.versionId);
          await this.createWithin(actor, {
            orgId,
            machine,
            name,
            versionId,
            context: message.spawn?.context ?? {},
            authContext,
            parent: message.from,
            receivedMessageId: message.id,
            madeDepth,
          });
          return;
        }
        head ??= await this.createWithin(actor, {
          orgId,
          machine,
          name,
          versionId: this.versionFor(orgId, machine, undefined),
          context: {},
          authContext,
          madeDepth,
        });
        await this.deliverEvent(actor, head, message.event as MachineEvent, authContext, { receivedMessageId: message.id });
      }),
    );
  }

  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void> {
    const actor = this.actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      const head = this.loadHead(actor);
      if (head.status === status) return;
      const next = { ...head, status };
      await this.replaceHeadOf(actor, head, next);
    });
  }

  /** A head-only change (status, desired version), fenced like a commit; inside the actor's mailbox. */
  private async replaceHeadOf(actor: InstanceActor, head: InstanceHead, next: InstanceHead): Promise<void> {
    try {
      await this.deps.instances.replaceHead(next, head);
    } catch (error) {
      this.dropHeadOnConflict(actor, error);
      throw asRequestError(error, `${actor.orgId}/${actor.machine}/${actor.name}`, this.deps.logger);
    }
    actor.head = next;
  }

  /**
   * Records the version the instance is to be upgraded to, once a chain of migrations leads there
   * from its version. Checked here, in the instance's mailbox, so that the version it is checked
   * against is the one the head has when the target is written. The instance's own version clears
   * any pending target (nothing to upgrade). A head-only change: no transition is recorded.
   */
  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void> {
    const actor = this.actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      const head = this.loadHead(actor);
      let next: InstanceHead;
      if (targetVersionId === head.versionId) {
        if (head.targetVersionId === undefined) return;
        const { targetVersionId: _cleared, ...rest } = head;
        next = rest;
      } else {
        if (head.targetVersionId === targetVersionId) return;
        if (!migrationPath(this.deps.versions.listMigrations(orgId, machine), head.versionId, targetVersionId)) {
          throw noMigrationPath(head.versionId, targetVersionId);
        }
        next = { ...head, targetVersionId };
      }
      await this.replaceHeadOf(actor, head, next);
    });
  }

  /**
   * Delivers the instance's delayed events that are due, through its mailbox like any event. A failed
   * delivery (paused instance, machine code failure) is retried later, then dropped with a log line.
   */
  fireTimers(orgId: string, machine: string, name: string): Promise<TimerFiring> {
    const actor = this.actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      this.dropStaleHead(actor);
      actor.head ??= this.deps.instances.getInstance(orgId, machine, name);
      const head = actor.head;
      if (!head) {
        this.actors.release(actor);
        return 'nothing-due';
      }
      const now = this.clock.now();
      const due = head.pendingTimers
        .filter((timer): timer is EventTimer => timer.kind === 'event' && timer.dueAt <= now)
        .sort((a, b) => a.dueAt - b.dueAt);
      if (due.length === 0) return 'nothing-due';
      if (head.status === 'paused') return this.deliveryFailed(actor, head, due, 'the instance is paused');
      // Timers due at the same moment fire in the first advance to that moment; the later advances
      // find nothing left to fire, so each timer still gets its own history record.
      const inputs: Input[] = due.map((timer) => ({
        event: timer.event,
        run: (sandbox, key, restore) => sandbox.advance(key, timer.dueAt, restore),
      }));
      // An upgrade that commits before the delivery fails moves the head on: the failure is recorded
      // against that head (the one before it would fail its fenced replace, and the attempt go uncounted).
      let current = head;
      try {
        current = await this.upgradeIfDue(actor, head);
        await this.retries.untilNotMoved(() => this.transition(actor, current, inputs, {}));
        return 'fired';
      } catch (error) {
        return this.deliveryFailed(actor, current, due, error instanceof Error ? error.message : String(error));
      }
    });
  }

  delete(orgId: string, machine: string, name: string): Promise<boolean> {
    const actor = this.actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      let deleted: boolean;
      try {
        deleted = await this.deps.instances.deleteInstance(orgId, machine, name);
      } catch (error) {
        // (a cluster's delete fenced by another node's write: the instance changed, so it is kept)
        this.dropHeadOnConflict(actor, error);
        throw asRequestError(error, `${orgId}/${machine}/${name}`, this.deps.logger);
      }
      actor.head = undefined;
      actor.discardLive();
      this.actors.release(actor);
      if (deleted) this.deps.updates?.publish({ kind: 'deleted', orgId, machine, name });
      return deleted;
    });
  }

  /**
   * Lets go of what nobody used for the idle time: live actors (they rebuild from their snapshot on
   * the next request) and then the isolates of versions no held actor is on. Without this, a node
   * keeps an isolate for every version any instance ever used, until it restarts.
   */
  sweepIdle(now: number = this.clock.now()): { actors: number; versions: string[] } {
    const before = now - this.deps.settings.idleUnloadMs;
    const actors = this.actors.evictUnusedSince(before);
    const versions = this.deps.sandboxes.unloadUnusedSince(before, this.actors.versionsInUse());
    if (actors > 0 || versions.length > 0) {
      const freed = versions.length > 0 ? `, unloaded machine versions ${versions.join(' ')}` : '';
      this.deps.logger.info(`idle for ${this.deps.settings.idleUnloadMs / 1000} s: evicted ${actors} live actors${freed}`);
    }
    return { actors, versions };
  }

  /**
   * The sandbox worker measured what a version's live actors hold of its isolate (live-heap-watch.ts).
   * Over their budget: a cap on how many may be live there, from what each holds, and the least
   * recently used idle ones beyond it are evicted (they reload from their snapshots on their next
   * request); no request fails for it and the isolate stays. Back within it: the cap goes.
   */
  relieveLiveHeap({ version, heldBytes, budgetBytes }: LiveHeapReport): number {
    if (heldBytes <= budgetBytes) {
      this.actors.capLiveIn(version, undefined);
      return 0;
    }
    const live = liveActorsIn(version);
    const cap = liveActorCap(live, heldBytes, budgetBytes);
    const evicted = this.actors.capLiveIn(version, cap);
    const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    this.deps.logger.info(
      `live actors of machine version ${version.versionId} held ${mb(heldBytes)} MB of its isolate (--live-actor-memory-mb ${mb(budgetBytes)}): evicted ${evicted} least recently used, at most ${cap} of ${live} stay live until it is back within`,
    );
    return evicted;
  }

  /**
   * What this node holds in memory, for operators (GET /stats): actors held (their heads) and live in
   * a sandbox, the node's own memory, and each sandbox worker's memory, isolate heaps and live actors.
   */
  async stats(): Promise<RuntimeStats> {
    const memory = process.memoryUsage();
    return {
      node: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed },
      actors: { held: this.actors.size, live: this.actors.liveCount(), maxHeld: this.deps.settings.maxLiveActors },
      sandboxWorkers: await this.deps.sandboxes.stats(),
    };
  }

  /**
   * Lets go of the idle actors of instances `owns` says another node owns now (a cluster's membership
   * changed): a later request for one, routed here again, loads its latest head.
   */
  releaseNotOwned(owns: (orgId: string, machine: string, name: string) => boolean): number {
    return this.actors.forgetWhere((actor) => !owns(actor.orgId, actor.machine, actor.name));
  }

  /** Frees the isolates of versions that were deleted (with their machine, which had no instances left). */
  unloadVersions(versionIds: string[]): void {
    for (const versionId of versionIds) this.deps.sandboxes.unload(versionId);
    this.indexer.forget(versionIds);
  }

  /** Waits for every mailbox to empty and the meters and logs to be written. */
  async close(): Promise<void> {
    await Promise.all([...this.actors.all()].map((actor) => actor.enqueue(async () => undefined)));
    await this.usage.flush();
    await this.deps.logs.flush();
  }

  /**
   * Runs `work`, the deletion of a machine that has no instances, while no instance of it is being
   * created; 409 if one is (see MachineGate).
   */
  whileDeletingMachine<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T> {
    return this.gate.whileDeleting(orgId, machine, work);
  }

  /** This node's part in a deletion another cluster node runs (MachineGate.close). */
  gateMachine(orgId: string, machine: string, closed: boolean): void {
    if (closed) this.gate.close(orgId, machine, MACHINE_GATE_HOLD_MS);
    else this.gate.open(orgId, machine);
  }

  /** Runs inside the mailbox; its machine cannot be deleted meanwhile (MachineGate). */
  private async createWithin(actor: InstanceActor, request: Creation): Promise<InstanceHead> {
    const leave = this.gate.enterCreate(request.orgId, request.machine);
    try {
      if (!this.deps.machines.getMachine(request.orgId, request.machine)) throw notFound(`machine ${request.machine} does not exist`);
      return await this.createFirstRecord(actor, request);
    } finally {
      leave();
    }
  }

  /** allowWrite initialization, start, settle, commit the first record. */
  private async createFirstRecord(actor: InstanceActor, request: Creation): Promise<InstanceHead> {
    const { orgId, machine, name, versionId } = request;
    // Checked inside the mailbox too: a create queued behind another create of the same name.
    this.dropStaleHead(actor);
    const existing = actor.head ?? this.deps.instances.getInstance(orgId, machine, name);
    if (existing && request.requestId !== undefined && this.createdBy(existing, request.requestId)) return existing;
    if (existing) throw conflict(`instance ${name} of machine ${machine} already exists`);
    const sandbox = await this.deps.sandboxes.get(orgId, machine, versionId);
    const now = this.clock.now();
    const effects = new StepEffects();
    try {
      actor.sandbox = sandbox;
      const seqBeforeFirst = sandbox.activitySeq;
      // allowWrite (initialization) and the start in one round trip, as events do
      const authorization = {
        type: 'initialization' as const,
        machineInstanceName: name,
        context: request.context,
        authContext: request.authContext,
      };
      const started = await sandbox.startAuthorized(
        actor.key,
        { context: request.context },
        { machineInstanceName: name, nowMs: now },
        authorization,
      );
      if (started === 'rejected') throw rejectedByAuthorizer('allowWrite');
      const first = effects.absorb(started);
      const settled = await this.settleStep(actor, sandbox, first, now, effects, seqBeforeFirst);
      const { result, stoppedChildren } = settled;
      const size = this.sizeOf(result);
      const untilFired = settled.beforeFired ?? result;
      const records: TransitionRecord[] = [
        {
          seq: 1,
          createdAt: '',
          ts: now,
          event: INIT_EVENT,
          state: untilFired.state,
          context: untilFired.context,
          ...(request.requestId === undefined ? {} : { requestId: request.requestId }),
        },
        ...this.firedRecords(settled, 1),
      ];
      const last = records.at(-1) as TransitionRecord;
      last.state = result.state;
      last.context = result.context;
      stampTimes(records, now - 1);
      const head: InstanceHead = this.indexer.index({
        orgId,
        machine,
        name,
        versionId,
        createdAt: new Date(now).toISOString(),
        status: 'running',
        seq: last.seq,
        ts: last.ts,
        ...headStateOf(result),
        stoppedChildren,
        timerAttempts: {},
        ...(request.parent ? { parent: request.parent } : {}),
        ...(request.madeDepth ? { madeDepth: request.madeDepth } : {}),
      });
      const outbox = this.outboxOf(head, effects, now);
      const commitEffects: CommitEffects = {
        outbox,
        ...(request.receivedMessageId ? { receivedMessageId: request.receivedMessageId } : {}),
      };
      const created = await this.deps.instances.createInstance(head, records, commitEffects);
      if (!created) {
        // A retried create whose first attempt did land (its answer was lost) answers that instance.
        const stored = this.deps.instances.getInstance(orgId, machine, name);
        if (stored && request.requestId !== undefined && this.createdBy(stored, request.requestId)) {
          actor.discardLive();
          actor.head = stored;
          return stored;
        }
        throw conflict(`instance ${name} of machine ${machine} already exists`);
      }
      this.usage.transitions(
        orgId,
        machine,
        billedTransitions(records.length, size.contextBytes, changedIndexes(undefined, head.indexValues)),
      );
      this.committed(actor, head, size.stateBytes, outbox);
      return head;
    } catch (error) {
      actor.discardLive();
      throw asRequestError(error, `${orgId}/${machine}/${name}`, this.deps.logger);
    }
  }

  /** Runs inside the mailbox: allowWrite for an event, then the event with what is owed before it. */
  private async deliverEvent(
    actor: InstanceActor,
    head: InstanceHead,
    event: MachineEvent,
    authContext: JsonObject,
    effects: CommitEffects,
    requestId?: string,
  ): Promise<InstanceHead> {
    const { orgId, machine, name } = actor;
    if (head.status === 'paused') throw conflict(`instance ${name} is paused: events are rejected until it runs again`);
    head = await this.upgradeIfDue(actor, head);
    const request = { type: 'event' as const, machineInstanceName: name, state: head.state, context: head.context, event, authContext };
    const now = this.clock.now();
    if (head.stoppedChildren.length === 0) {
      // The usual case: the authorizer and the event in one call into the sandbox.
      const caller = { machineInstanceName: name, authContext };
      const run: Input['run'] = async (sandbox, key, restore) => {
        const stepped = await sandbox.sendAuthorized(key, caller, event, now, restore);
        if (stepped === 'rejected') throw rejectedByAuthorizer('allowWrite');
        return stepped;
      };
      return this.transition(actor, head, [{ event, run, ...(requestId === undefined ? {} : { requestId }) }], effects);
    }
    const sandbox = await this.deps.sandboxes.get(orgId, machine, head.versionId);
    if (!(await this.guard(sandbox.allowWrite(request), orgId, machine, name))) throw rejectedByAuthorizer('allowWrite');
    // Children stopped when an earlier event timed out get their error events first (wire-protocol §8.1).
    const inputs: Input[] = head.stoppedChildren.map((childId) => {
      const errorEvent = childStoppedEvent(head.snapshot, childId);
      return { event: errorEvent, run: (vi, key, restore) => vi.send(key, errorEvent, now, restore) };
    });
    inputs.push({ event, ...(requestId === undefined ? {} : { requestId }), run: (vi, key, restore) => vi.send(key, event, now, restore) });
    return this.transition(actor, head, inputs, effects);
  }

  /**
   * The lazy upgrade (wire-protocol §8.5): an instance with a desired version runs the migration chain
   * when the next event reaches it (settled: every commit is), commits the upgrade record on the new
   * version, and the event then runs on the new code. A migration that throws or gives paths that make
   * no state of the new machine fails the event and leaves the instance on its version; it is logged.
   */
  private async upgradeIfDue(actor: InstanceActor, head: InstanceHead): Promise<InstanceHead> {
    const target = head.targetVersionId;
    if (target === undefined || target === head.versionId) return head;
    const { orgId, machine, name } = actor;
    const from = head.versionId;
    try {
      const { records, next, size, migrationIds } = await this.upgrader.plan(actor, head, target);
      await this.deps.instances.commit(next, head, records, {});
      this.usage.transitions(orgId, machine, billedTransitions(1, size.contextBytes, changedIndexes(head.indexValues, next.indexValues)));
      this.committed(actor, next, size.stateBytes, []);
      this.deps.logs.service(
        orgId,
        machine,
        name,
        'info',
        `upgraded from ${from} to ${target} (migrations ${migrationIds.join(', ')})`,
        {},
        target,
      );
      return next;
    } catch (error) {
      actor.discardLive();
      this.dropHeadOnConflict(actor, error);
      const failure =
        error instanceof InvalidUpgradePathError
          ? machineCodeFailed(error.message)
          : asRequestError(error, `${orgId}/${machine}/${name}`, this.deps.logger);
      if (!(failure instanceof ServiceError) || failure.status >= 500) throw failure;
      const message = `upgrading from ${from} to ${target} failed, the instance stays on ${from}: ${failure.message}`;
      this.deps.logs.service(orgId, machine, name, 'error', message, {}, from);
      throw new ServiceError(failure.status, failure.code, message, failure.parameter);
    }
  }

  /**
   * The shared pipeline of every write after creation: run the inputs on the live actor, settle after
   * the last one, check the context, commit records, outbox and effects in one transaction. On any
   * failure the live actor is dropped, so the instance stays exactly as committed.
   */
  private async transition(actor: InstanceActor, head: InstanceHead, inputs: Input[], commitEffects: CommitEffects): Promise<InstanceHead> {
    const now = this.clock.now();
    const effects = new StepEffects();
    try {
      // The usual case (version loaded, actor live) costs no extra turns of the microtask queue.
      const sandbox =
        this.deps.sandboxes.loaded(head.versionId) ?? (await this.deps.sandboxes.get(actor.orgId, actor.machine, head.versionId));
      // Not live there (evicted, or a new worker): the first call restores it from the head it already
      // holds, in the same round trip, so a reload costs no more sandbox work than an ordinary event.
      let restore = actor.sandbox !== sandbox || !sandbox.healthy ? this.restoreOf(actor, head) : undefined;
      actor.sandbox = sandbox;
      const records: TransitionRecord[] = [];
      let result: StepResult | undefined;
      const seqBeforeFirst = sandbox.activitySeq;
      for (const input of inputs) {
        const appliedAt = this.clock.now();
        result = effects.absorb(await input.run(sandbox, actor.key, restore));
        restore = undefined;
        records.push({
          seq: head.seq + records.length + 1,
          createdAt: '',
          ts: appliedAt,
          event: input.event,
          state: result.state,
          context: result.context,
          ...(input.requestId === undefined ? {} : { requestId: input.requestId }),
        });
      }
      if (!result) return head;
      const settled: Settled = isSettled(result, now + this.deps.settings.settleBudgetMs)
        ? { result, stoppedChildren: [], fired: [] }
        : await this.settleStep(actor, sandbox, result, now, effects, seqBeforeFirst);
      const lastInput = records.at(-1) as TransitionRecord;
      const untilFired = settled.beforeFired ?? settled.result;
      lastInput.state = untilFired.state;
      lastInput.context = untilFired.context;
      records.push(...this.firedRecords(settled, lastInput.seq));
      const last = records.at(-1) as TransitionRecord;
      last.state = settled.result.state;
      last.context = settled.result.context;
      const size = this.sizeOf(settled.result);
      return await this.commit(actor, head, records, settled.result, settled.stoppedChildren, size, effects, commitEffects);
    } catch (error) {
      // A write the authorizer refused never reached the machine: its live interpreter is intact.
      if (!(error instanceof ServiceError && error.code === 'rejected-by-machine-authorizer')) actor.discardLive();
      this.dropHeadOnConflict(actor, error);
      throw asRequestError(error, `${actor.orgId}/${actor.machine}/${actor.name}`, this.deps.logger);
    }
  }

  private async commit(
    actor: InstanceActor,
    head: InstanceHead,
    records: TransitionRecord[],
    result: StepResult,
    stoppedChildren: string[],
    size: { contextBytes: number; stateBytes: number },
    effects: StepEffects,
    commitEffects: CommitEffects,
  ): Promise<InstanceHead> {
    stampTimes(records, head.ts);
    const last = records.at(-1) as TransitionRecord;
    const state = headStateOf(result);
    const timerAttempts = keptTimerAttempts(head.timerAttempts, state.pendingTimers);
    const next = this.indexer.index({ ...head, seq: last.seq, ts: last.ts, ...state, stoppedChildren, timerAttempts });
    const outbox = this.outboxOf(next, effects, last.ts);
    await this.deps.instances.commit(next, head, records, { ...commitEffects, outbox });
    this.usage.transitions(
      actor.orgId,
      actor.machine,
      billedTransitions(records.length, size.contextBytes, changedIndexes(head.indexValues, next.indexValues)),
    );
    this.committed(actor, next, size.stateBytes, outbox);
    return next;
  }

  /** After a durable commit: remember the head, account memory, wake the timer scheduler and the outbox. */
  private committed(actor: InstanceActor, head: InstanceHead, stateBytes: number, outbox: OutboxMessage[]): void {
    actor.head = head;
    this.deps.updates?.publish(updateOf(head));
    this.actors.resize(actor, stateBytes + 4096);
    if (head.pendingTimers.length > 0) this.deps.onTimersPending?.(Math.min(...head.pendingTimers.map((timer) => timer.dueAt)));
    if (outbox.length > 0) {
      this.deps.fault?.('after-sender-commit');
      this.deps.onOutbox?.();
    }
  }

  private outboxOf(sender: InstanceHead, effects: StepEffects, now: number): OutboxMessage[] {
    return outboxMessages(sender, effects, now, (type) =>
      this.deps.logs.service(
        sender.orgId,
        sender.machine,
        sender.name,
        'warn',
        `sendParent(${type}) has no persistent parent to go to; dropped`,
        { event: type },
      ),
    );
  }

  /** The version a new instance of `machine` gets when another instance creates it. */
  private versionFor(orgId: string, machine: string, requested: string | undefined): string {
    const record = this.deps.machines.getMachine(orgId, machine);
    if (!record) throw notFound(`machine ${machine} does not exist`);
    if (requested !== undefined) {
      if (!this.deps.versions.getVersion(orgId, machine, requested)) throw notFound(`machine ${machine} has no version ${requested}`);
      return requested;
    }
    if (!record.currentVersionId) throw conflict(`machine ${machine} has no current version`);
    return record.currentVersionId;
  }

  /** Moves the failed timers a retry delay ahead, or drops those out of retries (timer-retries.ts); the live actor is rebuilt from the result. */
  private async deliveryFailed(actor: InstanceActor, head: InstanceHead, due: PendingTimer[], reason: string): Promise<TimerFiring> {
    const { timerRetryDelayMs, timerMaxRetries } = this.deps.settings;
    const { next, dropped, lines } = timerRetryPlan(
      head,
      due,
      reason,
      { retryDelayMs: timerRetryDelayMs, maxRetries: timerMaxRetries },
      this.clock.now(),
    );
    for (const line of lines) this.deps.logs.service(actor.orgId, actor.machine, actor.name, line.level, line.message, line.attrs);
    const { pendingTimers } = next;
    try {
      await this.deps.instances.replaceHead(next, head);
    } catch (error) {
      this.dropHeadOnConflict(actor, error);
      throw error;
    }
    actor.head = next;
    // The live interpreter still has the old due times: rebuild it from the head on next use.
    actor.discardLive();
    if (pendingTimers.length > 0) this.deps.onTimersPending?.(Math.min(...pendingTimers.map((timer) => timer.dueAt)));
    return dropped ? 'dropped' : 'retry-later';
  }

  private loadHead(actor: InstanceActor): InstanceHead {
    this.dropStaleHead(actor);
    actor.head ??= this.deps.instances.getInstance(actor.orgId, actor.machine, actor.name);
    if (!actor.head) {
      this.actors.release(actor);
      throw notFound(`instance ${actor.name} of machine ${actor.machine} does not exist`);
    }
    return actor.head;
  }

  private async settleStep(
    actor: InstanceActor,
    sandbox: RemoteVersion,
    first: StepResult,
    startedAt: number,
    effects: StepEffects,
    seqBeforeFirst: number,
  ): Promise<Settled> {
    // Delayed events that come due while settling are processed events like any other (interface-spec,
    // Events 2): each gets its own history record. So the clock is advanced to one due time after
    // another, and each record holds the state the machine was in when the next event came.
    const fired: FiredTimer[] = [];
    let beforeFired: StepResult | undefined;
    let latest = first;
    const advance = async (nowMs: number) => {
      // Due times one after another, earliest first, including delayed events that fired ones schedule
      // (bounded: an actor holds at most 1,000 timers). Timers due at the same moment fire together.
      for (let round = 0; round < 1_000; round++) {
        const due = latest.pendingTimers.filter((timer): timer is EventTimer => timer.kind === 'event' && timer.dueAt <= nowMs);
        if (due.length === 0) break;
        const at = Math.min(...due.map((timer) => timer.dueAt));
        const before = latest;
        // (a JS timer may wake the loop a hair early; the sandbox is told the due time then)
        const appliedAt = Math.max(this.clock.now(), at);
        latest = effects.absorb(await sandbox.advance(actor.key, at));
        const pending = new Set(latest.pendingTimers.map((timer) => timer.id));
        const firedNow = due.filter((timer) => timer.dueAt === at && !pending.has(timer.id));
        if (firedNow.length === 0) break;
        const previous = fired.at(-1);
        if (previous) previous.result = before;
        else beforeFired = before;
        for (const timer of firedNow) fired.push({ event: timer.event, result: latest, appliedAt });
      }
      latest = effects.absorb(await sandbox.advance(actor.key, nowMs));
      return latest;
    };
    const host = { activitySeq: () => sandbox.activitySeq, nextActivity: (since: number) => sandbox.nextActivity(since), seqBeforeFirst };
    const outcome = await settle(advance, first, startedAt + this.deps.settings.settleBudgetMs, host);
    const firedPart = beforeFired ? { fired, beforeFired } : { fired: [] };
    if (!outcome.timedOut) return { result: outcome.result, stoppedChildren: [], ...firedPart };
    const stopped = (await sandbox.stopChildren(actor.key)).map((child) => child.id);
    for (const id of stopped) {
      this.deps.logs.service(
        actor.orgId,
        actor.machine,
        actor.name,
        'warn',
        `stopped child ${id}: the machine did not settle within ${this.deps.settings.settleBudgetMs} ms`,
        { child: id },
      );
    }
    // The state after stopping the children (read back; a delayed event due by now fires, recorded).
    const result = await advance(this.clock.now());
    return { result, stoppedChildren: stopped, ...(beforeFired ? { fired, beforeFired } : { fired: [] }) };
  }

  /** History records for the delayed events that fired while settling, numbered on from `lastSeq`. */
  private firedRecords(settled: Settled, lastSeq: number): TransitionRecord[] {
    return settled.fired.map((f, i) => ({
      seq: lastSeq + i + 1,
      createdAt: '',
      ts: f.appliedAt,
      event: f.event,
      state: f.result.state,
      context: f.result.context,
    }));
  }

  /** What restores the actor's live state from its committed head (after eviction, a failure or a new worker). */
  private restoreOf(actor: InstanceActor, head: InstanceHead): Restore {
    return { name: actor.name, snapshot: head.snapshot, value: head.state, context: head.context, pendingTimers: head.pendingTimers };
  }

  /** The step's sizes within the limits (commit-records.ts checkedSize). */
  private sizeOf(result: StepResult): { contextBytes: number; stateBytes: number } {
    return checkedSize(result, this.deps.settings);
  }

  /** Authorizers run machine code too: a runaway one fails the request, not the node. */
  private async guard<T>(call: Promise<T>, orgId: string, machine: string, name: string): Promise<T> {
    try {
      return await call;
    } catch (error) {
      throw asRequestError(error, `${orgId}/${machine}/${name}`, this.deps.logger);
    }
  }

  /** A head that moved under us (another writer) is reloaded by the next task, not retried forever. */
  private dropHeadOnConflict(actor: InstanceActor, error: unknown): void {
    if (error instanceof SequenceConflictError) {
      actor.head = undefined;
      actor.discardLive();
    }
  }
}
