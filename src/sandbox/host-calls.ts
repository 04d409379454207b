/**
 * The host operations one isolate has in flight (today: fetches), with who started them.
 *
 * - `start` is what the audited fetch callback calls: it refuses beyond MAX_CONCURRENT_FETCHES per
 *   isolate, arms the per-call timeout and runs host-fetch.ts; it answers an id at once.
 * - On completion the outcome (plain data) goes to `onComplete` (the VersionIsolate delivers it into
 *   the isolate), then `nextActivity()` waiters are woken.
 * - `drop(owner)` aborts an actor's calls (actor stopped, children stopped, actor rebuilt); their
 *   outcomes are never delivered.
 */
import { FetchFailure, hostFetch, type HostFetchRequest, type HostFetchResponse } from './host-fetch.js';
import { parseAllowList, type EgressOptions, type Lookup } from './egress-policy.js';
import type { FetchStart } from './host-callbacks.js';

const MAX_CONCURRENT_FETCHES = 16;

export type HostCallOutcome = { ok: HostFetchResponse } | { error: string };

interface Operation {
  owner: string | null;
  controller: AbortController;
  timer: NodeJS.Timeout;
}

export class HostCalls {
  /** False until the version finished loading: top-level code cannot fetch. */
  ready = false;
  onComplete: ((id: number, owner: string | null, outcome: HostCallOutcome) => void) | undefined;
  private seq = 0;
  private readonly ops = new Map<number, Operation>();
  private activityCount = 0;
  private waiters: (() => void)[] = [];
  private closed = false;
  private readonly allow;

  constructor(
    private readonly egress: EgressOptions,
    private readonly lookup?: Lookup,
  ) {
    this.allow = parseAllowList(egress.allow);
  }

  readonly start: FetchStart = (owner: string | null, request: HostFetchRequest) => {
    if (this.closed) return { error: 'the sandbox is shutting down' };
    if (!this.ready) return { error: "fetch is not available while the bundle's top-level code runs" };
    if (this.ops.size >= MAX_CONCURRENT_FETCHES)
      return { error: `too many fetches in flight (at most ${MAX_CONCURRENT_FETCHES} per machine version)` };
    const id = ++this.seq;
    const controller = new AbortController();
    const timeoutMs = this.egress.timeoutMs;
    const timer = setTimeout(() => controller.abort(new FetchFailure(`timed out after ${timeoutMs} ms`)), timeoutMs);
    timer.unref();
    this.ops.set(id, { owner, controller, timer });
    const policy = { allow: this.allow, maxResponseBytes: this.egress.maxResponseBytes, ...(this.lookup ? { lookup: this.lookup } : {}) };
    // completion is delivered from its own macrotask, so never from inside a call into the isolate
    hostFetch(request, policy, controller.signal).then(
      (response) => setImmediate(() => this.complete(id, { ok: response })),
      (e: unknown) => setImmediate(() => this.complete(id, { error: e instanceof FetchFailure ? e.message : 'network error' })),
    );
    return { id };
  };

  /** Calls in flight started by this actor. */
  pendingFor(owner: string): number {
    let n = 0;
    for (const op of this.ops.values()) if (op.owner === owner) n++;
    return n;
  }

  get inFlight(): number {
    return this.ops.size;
  }

  /** Increments each time an outcome was handed over; see nextActivity. */
  get activitySeq(): number {
    return this.activityCount;
  }

  /** Aborts the actor's calls in flight; their outcomes are dropped. */
  drop(owner: string): void {
    let dropped = false;
    for (const [id, op] of this.ops) {
      if (op.owner !== owner) continue;
      this.ops.delete(id);
      clearTimeout(op.timer);
      op.controller.abort(new FetchFailure('the actor was stopped'));
      dropped = true;
    }
    // waiters must not outlive the calls they wait for (a spurious wake-up is harmless)
    if (dropped && this.ops.size === 0) this.wake();
  }

  close(): void {
    this.closed = true;
    for (const [id, op] of this.ops) {
      this.ops.delete(id);
      clearTimeout(op.timer);
      op.controller.abort(new FetchFailure('the sandbox was disposed'));
    }
    this.wake();
  }

  /** Resolves once an outcome is handed over after `since` (an activitySeq value; default: now), or on close. */
  nextActivity(since: number = this.activityCount): Promise<void> {
    if (this.closed || this.activityCount > since) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private complete(id: number, outcome: HostCallOutcome): void {
    const op = this.ops.get(id);
    if (!op) return; // dropped meanwhile
    this.ops.delete(id);
    clearTimeout(op.timer);
    try {
      this.onComplete?.(id, op.owner, outcome);
    } finally {
      this.activityCount++;
      this.wake();
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
