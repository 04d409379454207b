import { RecencyMap } from '../domain/recency-map.js';
import { actorKey } from './actor-key.js';
import { InstanceActor, liveActorsIn } from './instance-actor.js';
import type { VersionSandbox } from './runtime-sandboxes.js';

/**
 * The actors this node holds, nearly least recently used first (RecencyMap: a request moves its actor
 * to the newest end only from the older half of the map, so an actor is evicted for the bounds only
 * once half the map was inserted since its last request). Idle actors beyond the count or memory bound,
 * or beyond the cap of the version they are live in, are evicted: their live interpreter is stopped
 * and they reload from their snapshot on demand.
 */
export class ActorRegistry {
  private readonly actors = new RecencyMap<string, InstanceActor>();
  private bytes = 0;
  /** Live actors evicted so far (idle, over the count or memory bound, over a version's cap): for GET /metrics. */
  evictions = 0;
  /** Live actors allowed per sandboxed version, where its live actors outgrew their memory budget (capLiveIn). */
  private readonly liveCaps = new WeakMap<VersionSandbox, number>();

  constructor(
    private readonly maxActors: number,
    private readonly maxBytes: number,
  ) {}

  obtain(orgId: string, machine: string, name: string): InstanceActor {
    const key = actorKey(orgId, machine, name);
    let actor = this.actors.touch(key, this.actors.size / 2);
    if (!actor) {
      actor = new InstanceActor(key, orgId, machine, name);
      this.actors.set(key, actor);
    }
    actor.lastUsedAt = Date.now();
    return actor;
  }

  peek(orgId: string, machine: string, name: string): InstanceActor | undefined {
    return this.actors.get(actorKey(orgId, machine, name));
  }

  resize(actor: InstanceActor, bytes: number): void {
    if (this.actors.get(actor.key) !== actor) return;
    this.bytes += bytes - actor.approxBytes;
    actor.approxBytes = bytes;
    if (actor.sandbox) this.evictLiveBeyondCap(actor.sandbox);
    this.evictIdle();
  }

  /**
   * Called from inside one of the actor's tasks: drops it only when no other task is queued behind,
   * since those run on this actor object (a second actor for the same instance would break its
   * single mailbox).
   */
  release(actor: InstanceActor): void {
    if (actor.alone) this.forget(actor);
  }

  forget(actor: InstanceActor): void {
    if (this.actors.get(actor.key) !== actor) return;
    this.actors.delete(actor.key);
    this.bytes -= actor.approxBytes;
    actor.discardLive();
  }

  /**
   * Evicts the idle actors no request took since `before`, walking them all (their order is only nearly
   * by last use). Returns how many went.
   */
  evictUnusedSince(before: number): number {
    let evicted = 0;
    // Deleting the entry being visited is safe while iterating a Map.
    for (const actor of this.actors.values()) {
      if (actor.lastUsedAt >= before || !actor.idle) continue;
      this.forget(actor);
      evicted++;
    }
    this.evictions += evicted;
    return evicted;
  }

  /**
   * Lets go of the idle actors `keep` refuses (in a cluster: the instances this node no longer owns),
   * so that when one comes back to this node it is loaded from its latest head, not from a stale one
   * held meanwhile. A busy actor is left to finish; the log fences it if it writes. Returns how many went.
   */
  forgetWhere(drop: (actor: InstanceActor) => boolean): number {
    let dropped = 0;
    for (const actor of this.actors.values()) {
      if (!actor.idle || !drop(actor)) continue;
      this.forget(actor);
      dropped++;
    }
    return dropped;
  }

  /**
   * Caps how many actors may be live in `sandbox` (undefined: no cap) and evicts its least recently
   * used idle ones down to it (a busy one's tasks run on its live interpreter). Returns how many went.
   * The cap holds until changed: each actor that becomes live there beyond it evicts another (resize).
   */
  capLiveIn(sandbox: VersionSandbox, cap: number | undefined): number {
    if (cap === undefined) {
      this.liveCaps.delete(sandbox);
      return 0;
    }
    this.liveCaps.set(sandbox, cap);
    return this.evictLiveBeyondCap(sandbox);
  }

  /** The cap set on `sandbox`, if any. */
  liveCapOf(sandbox: VersionSandbox): number | undefined {
    return this.liveCaps.get(sandbox);
  }

  /** The versions the held actors are on or live in: what must stay loaded. */
  versionsInUse(): Set<string> {
    const inUse = new Set<string>();
    for (const actor of this.actors.values()) {
      if (actor.head) inUse.add(actor.head.versionId);
      if (actor.sandbox) inUse.add(actor.sandbox.versionId);
    }
    return inUse;
  }

  /** How many of the held actors are live in a sandbox (the rest reload from their head on demand). */
  liveCount(): number {
    let live = 0;
    for (const actor of this.actors.values()) if (actor.sandbox) live++;
    return live;
  }

  get size(): number {
    return this.actors.size;
  }

  all(): IterableIterator<InstanceActor> {
    return this.actors.values();
  }

  private evictLiveBeyondCap(sandbox: VersionSandbox): number {
    const cap = this.liveCaps.get(sandbox);
    if (cap === undefined || liveActorsIn(sandbox) <= cap) return 0;
    let evicted = 0;
    for (const actor of this.actors.values()) {
      if (liveActorsIn(sandbox) <= cap) break;
      if (actor.sandbox !== sandbox || !actor.idle) continue;
      this.forget(actor);
      evicted++;
    }
    this.evictions += evicted;
    return evicted;
  }

  private evictIdle(): void {
    if (this.actors.size <= this.maxActors && this.bytes <= this.maxBytes) return;
    for (const actor of this.actors.values()) {
      if (this.actors.size <= this.maxActors && this.bytes <= this.maxBytes) return;
      if (!actor.idle) continue;
      this.forget(actor);
      this.evictions++;
    }
  }
}
