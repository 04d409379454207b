import type { InstanceHead } from '../store/instance-store.js';
import type { VersionSandbox } from './runtime-sandboxes.js';

/** How many actors are live in each sandboxed version, kept by InstanceActor.sandbox (for caps, actor-registry.ts). */
const liveIn = new WeakMap<VersionSandbox, number>();

export const liveActorsIn = (sandbox: VersionSandbox): number => liveIn.get(sandbox) ?? 0;

/**
 * One instance's actor: its mailbox (tasks run strictly one after another, which gives the single
 * linear history), its committed head, and the isolate it is live in, if any.
 */
export class InstanceActor {
  /** The last committed head; readers use it and never wait for the mailbox. */
  head: InstanceHead | undefined;
  private live: VersionSandbox | undefined;
  /** Rough memory held for this actor (its persisted state as JSON plus overhead), for eviction. */
  approxBytes = 0;
  /** When a request last took this actor (ms since the epoch), for idle eviction. */
  lastUsedAt = 0;
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(
    readonly key: string,
    readonly orgId: string,
    readonly machine: string,
    readonly name: string,
  ) {}

  /** The sandboxed version holding this actor's live interpreter; undefined when it must be rebuilt from `head`. */
  get sandbox(): VersionSandbox | undefined {
    return this.live;
  }

  set sandbox(next: VersionSandbox | undefined) {
    if (next === this.live) return;
    if (this.live) liveIn.set(this.live, liveActorsIn(this.live) - 1);
    if (next) liveIn.set(next, liveActorsIn(next) + 1);
    this.live = next;
  }

  enqueue<T>(task: () => Promise<T>): Promise<T> {
    this.queued++;
    const run = this.tail.then(task);
    this.tail = run.then(
      () => void this.queued--,
      () => void this.queued--,
    );
    return run;
  }

  get idle(): boolean {
    return this.queued === 0;
  }

  /** Resolves once every task queued so far has run (whatever its outcome). */
  settled(): Promise<void> {
    return this.tail;
  }

  /** Inside a task: whether it is the only one queued (nothing behind it relies on this actor). */
  get alone(): boolean {
    return this.queued <= 1;
  }

  /** Drops the live interpreter so the next task rebuilds it from the committed head. */
  discardLive(): void {
    if (this.sandbox?.healthy) this.sandbox.stop(this.key);
    this.sandbox = undefined;
  }
}
