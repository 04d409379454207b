import { type Clock, systemClock } from '../domain/clock.js';
import { InstanceNotFoundError, rejectedByAuthorizer } from '../domain/errors.js';
import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import type { CreateRequest } from '../domain/instance-requests.js';
import { allSettledWithin } from '../domain/within-ms.js';
import type { LiveHeapReport, WorkerStats } from '../sandbox/index.js';
import type { InstanceHead, InstanceStatus, OutboxMessage, UsageMonth } from '../store/instance-store.js';
import { ActorHeads } from './actor-heads.js';
import { ActorRegistry } from './actor-registry.js';
import { EventDelivery } from './event-delivery.js';
import { HeadIndexer } from './index-values.js';
import { liveActorsIn } from './instance-actor.js';
import { InstanceCreation } from './instance-creation.js';
import { LazyUpgrade } from './lazy-upgrade.js';
import { MachineGate } from './machine-gate.js';
import { MessageReceipt } from './message-receipt.js';
import { guarded, RequestRetries } from './request-retries.js';
import type { InstanceRuntimeDeps, RuntimeParts } from './runtime-parts.js';
import { HeadChanges } from './head-changes.js';
import { type TimerFiring, TimerDelivery } from './timer-firing.js';
import { TransitionPipeline } from './transition-pipeline.js';
import { UsageMeter } from './usage-meter.js';

interface RuntimeStats {
  node: { rssBytes: number; heapUsedBytes: number };
  actors: { held: number; live: number; maxHeld: number };
  sandboxWorkers: { main: WorkerStats | null; quarantine: WorkerStats | null };
}

export type { FaultPoint } from './runtime-parts.js';
export type { TimerFiring } from './timer-firing.js';
export type { CreateRequest } from '../domain/instance-requests.js';

/** How long a node keeps a machine's create gate closed for a deletion another node runs, should that node never open it. */
const MACHINE_GATE_HOLD_MS = 30_000;

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
 *
 * This class composes the parts and answers what needs no mailbox (reads, memory, stats); the writes
 * are its parts': instance-creation.ts, event-delivery.ts (with transition-pipeline.ts, settle-step.ts
 * and lazy-upgrade.ts under it), message-receipt.ts, timer-firing.ts, head-changes.ts.
 */
export class InstanceRuntime {
  private readonly actors: ActorRegistry;
  private readonly usage: UsageMeter;
  private readonly gate = new MachineGate();
  private readonly indexer: HeadIndexer;
  /** Requests run again when what failed under them was not their fault (request-retries.ts). */
  private readonly retries: RequestRetries;
  private readonly clock: Clock;
  private readonly heads: ActorHeads;
  private readonly creation: InstanceCreation;
  private readonly delivery: EventDelivery;
  private readonly receipt: MessageReceipt;
  private readonly timers: TimerDelivery;
  private readonly changes: HeadChanges;

  constructor(private readonly deps: InstanceRuntimeDeps) {
    this.clock = deps.clock ?? systemClock;
    this.retries = new RequestRetries({
      logger: deps.logger,
      quarantineVersion: (versionId) => deps.sandboxes.quarantineVersion(versionId, 'crash'),
    });
    this.actors = new ActorRegistry(deps.settings.maxLiveActors, deps.settings.maxLiveActorBytes);
    this.usage = new UsageMeter(deps.instances, deps.logger);
    this.indexer = new HeadIndexer(deps.versions);
    const parts: RuntimeParts = {
      deps,
      clock: this.clock,
      actors: this.actors,
      usage: this.usage,
      gate: this.gate,
      indexer: this.indexer,
      retries: this.retries,
    };
    this.heads = new ActorHeads(parts);
    const pipeline = new TransitionPipeline(parts);
    const upgrade = new LazyUpgrade(parts, pipeline);
    this.creation = new InstanceCreation(parts, this.heads, pipeline);
    this.timers = new TimerDelivery(parts, this.heads, pipeline, upgrade);
    this.delivery = new EventDelivery(parts, this.heads, pipeline, upgrade, (actor) => this.timers.fireDue(actor));
    this.receipt = new MessageReceipt(parts, this.heads, this.creation, this.delivery);
    this.changes = new HeadChanges(parts, this.heads);
  }

  /** The committed head, from memory when the actor is held (and the store has none later), else from the store. */
  head(orgId: string, machine: string, name: string): InstanceHead | undefined {
    return this.heads.head(orgId, machine, name);
  }

  /** Creates an instance (instance-creation.ts); a retried create with the same request id answers the instance it made. */
  create(request: CreateRequest): Promise<InstanceHead> {
    return this.creation.create(request);
  }

  /** allowRead against the committed state (wire-protocol §3.4); counts one read. */
  async read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceHead> {
    const head = this.head(orgId, machine, name);
    if (!head) throw new InstanceNotFoundError(machine, name);
    const allowed = await this.retries.untilNotMoved(async () => {
      const sandbox = await this.deps.sandboxes.get(orgId, machine, head.versionId);
      return guarded(
        sandbox.allowRead({ machineInstanceName: name, state: head.state, context: head.context, authContext }),
        `${orgId}/${machine}/${name}`,
        this.deps.logger,
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
      return guarded(
        sandbox.allowReads({ machineInstanceName: name, state: view.state, context: view.context, authContexts }),
        `${orgId}/${machine}/${name}`,
        this.deps.logger,
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
    return this.delivery.send(orgId, machine, name, event, authContext, requestId, retry);
  }

  /**
   * Applies a message from another instance (wire-protocol §7.4): creates a spawned child, or delivers
   * an event (creating the target with its default context when it does not exist yet). A message this
   * instance already applied (redelivered after a crash) is acknowledged without applying it again.
   */
  receive(message: OutboxMessage): Promise<void> {
    return this.receipt.receive(message);
  }

  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void> {
    return this.changes.setStatus(orgId, machine, name, status);
  }

  /**
   * Records the version the instance is to be upgraded to, once a chain of migrations leads there
   * from its version (head-changes.ts); the upgrade itself runs when the next event reaches it.
   */
  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void> {
    return this.changes.setTargetVersion(orgId, machine, name, targetVersionId);
  }

  /**
   * Delivers the instance's delayed events that are due, through its mailbox like any event. A failed
   * delivery (paused instance, machine code failure) is retried later, then dropped with a log line.
   */
  fireTimers(orgId: string, machine: string, name: string): Promise<TimerFiring> {
    return this.timers.fire(orgId, machine, name);
  }

  delete(orgId: string, machine: string, name: string): Promise<boolean> {
    return this.changes.delete(orgId, machine, name);
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

  /** What GET /metrics reads at a scrape: actors held and live (a walk over the held ones). */
  actorCounts(): { held: number; live: number } {
    return { held: this.actors.size, live: this.actors.liveCount() };
  }

  /** Live actors evicted since start (the only one of these counted on the request path). */
  get evictions(): number {
    return this.actors.evictions;
  }

  /**
   * Lets go of the idle actors of instances `owns` says another node owns now (a cluster's membership
   * changed): a later request for one, routed here again, loads its latest head.
   */
  releaseNotOwned(owns: (orgId: string, machine: string, name: string) => boolean): number {
    return this.actors.forgetWhere((actor) => !owns(actor.orgId, actor.machine, actor.name));
  }

  /**
   * Resolves once the tasks under way on instances this node no longer owns have run (a cluster node
   * that gave instances away says so only then: see Membership.handOverWith), or after `maxMs`; true
   * when they all had.
   */
  settleNotOwned(owns: (orgId: string, machine: string, name: string) => boolean, maxMs: number): Promise<boolean> {
    const busy = [...this.actors.all()].filter((actor) => !actor.idle && !owns(actor.orgId, actor.machine, actor.name));
    return allSettledWithin(
      busy.map((actor) => actor.settled()),
      maxMs,
    );
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
}
