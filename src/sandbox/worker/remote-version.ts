/**
 * The node's handle on a machine version loaded in the sandbox worker (sandbox-client.ts): the same
 * operations as VersionIsolate, asynchronous, each one request to the worker. Its parameters are the
 * fields of those requests (protocol.ts is their one source).
 */
import { type OwnStall, SandboxDisposedError } from '../errors.js';
import { parseStep, type RawStep } from '../step-result.js';
import type { HttpApiOutcome, MachineDefinition, StepResult } from '../types.js';
import type { RequestOf, SandboxRequest } from './protocol.js';

/** The start requests' fields (a start, and a start once allowWrite allows it). */
type Start = RequestOf<'startAuthorized'>;
/** The event requests' fields (an event, and an event once allowWrite allows it). */
type Send = RequestOf<'sendAuthorized'>;

/** Where a version's requests go: the SandboxClient that loaded it. */
interface SandboxRequests {
  request(request: SandboxRequest): Promise<unknown>;
  /** A request nothing waits for. */
  notify(request: SandboxRequest): void;
}

/**
 * A machine version loaded in the worker: the same operations as VersionIsolate, asynchronous. Per
 * instance, callers keep the order of their calls (the runtime's mailbox does).
 */
export class RemoteVersion {
  private isHealthy = true;
  /** The actor whose call held the worker past the stall limit, when that retired this version's isolate. */
  private heldBy: { key: string; stall: OwnStall } | undefined;
  private seq = 0;
  private waiters: Array<{ since: number; resolve: () => void }> = [];

  constructor(
    readonly versionId: string,
    private readonly client: SandboxRequests,
  ) {}

  get healthy(): boolean {
    return this.isHealthy;
  }

  /** Counts host-call (fetch) completions of this version; see nextActivity. */
  get activitySeq(): number {
    return this.seq;
  }

  /** Resolves once a host call completed after `since` (or at once if one did, or the version is gone). */
  nextActivity(since: number): Promise<void> {
    if (this.seq > since || !this.isHealthy) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ since, resolve }));
  }

  /** The paths a v5 instance's history states remember (see VersionIsolate.rememberedPaths5). */
  rememberedPaths5(snapshot: RequestOf<'rememberedPaths5'>['snapshot']): Promise<string[][]> {
    return this.call({ op: 'rememberedPaths5', versionId: this.versionId, snapshot }) as Promise<string[][]>;
  }

  /** The machine's states and transitions (see VersionIsolate.definition). */
  definition(): Promise<MachineDefinition> {
    return this.call({ op: 'definition', versionId: this.versionId }) as Promise<MachineDefinition>;
  }

  allowRead(request: RequestOf<'allowRead'>['request']): Promise<boolean> {
    return this.call({ op: 'allowRead', versionId: this.versionId, request }) as Promise<boolean>;
  }

  /** allowRead of one state for several auth contexts, in one round trip. */
  allowReads(request: RequestOf<'allowReads'>['request']): Promise<boolean[]> {
    return this.call({ op: 'allowReads', versionId: this.versionId, request }) as Promise<boolean[]>;
  }

  allowWrite(request: RequestOf<'allowWrite'>['request']): Promise<boolean> {
    return this.call({ op: 'allowWrite', versionId: this.versionId, request }) as Promise<boolean>;
  }

  async start(key: string, init: Start['init'], options: Start['options']): Promise<StepResult> {
    return parseStep((await this.call({ op: 'start', versionId: this.versionId, key, init, options })) as RawStep);
  }

  /** allowWrite for a new instance and, when it allows, its start, in one round trip; 'rejected' starts nothing. */
  async startAuthorized(
    key: string,
    init: Start['init'],
    options: Start['options'],
    request: Start['request'],
  ): Promise<StepResult | 'rejected'> {
    const raw = (await this.call({ op: 'startAuthorized', versionId: this.versionId, key, init, options, request })) as
      RawStep | 'rejected';
    return raw === 'rejected' ? raw : parseStep(raw);
  }

  /** `restore`: the actor is not live here (evicted, or a new worker); restored in the same round trip. */
  async send(key: string, event: Send['event'], now: number, restore?: Send['restore']): Promise<StepResult> {
    return parseStep(
      (await this.call({ op: 'send', versionId: this.versionId, key, event, now, ...(restore ? { restore } : {}) })) as RawStep,
    );
  }

  /**
   * allowWrite (against the live actor's state, which is the committed one) and, when it allows, the
   * event, in one round trip; 'rejected' leaves the actor as it was.
   */
  async sendAuthorized(
    key: string,
    caller: Send['caller'],
    event: Send['event'],
    now: number,
    restore?: Send['restore'],
  ): Promise<StepResult | 'rejected'> {
    const raw = (await this.call({
      op: 'sendAuthorized',
      versionId: this.versionId,
      key,
      caller,
      event,
      now,
      ...(restore ? { restore } : {}),
    })) as RawStep | 'rejected';
    return raw === 'rejected' ? raw : parseStep(raw);
  }

  async advance(key: string, now: number, restore?: RequestOf<'advance'>['restore']): Promise<StepResult> {
    return parseStep((await this.call({ op: 'advance', versionId: this.versionId, key, now, ...(restore ? { restore } : {}) })) as RawStep);
  }

  /** httpApiMapper[slug].handler(request) (wire-protocol §3.14); see VersionIsolate.httpApiHandler. */
  httpApiHandler(slug: string, request: RequestOf<'httpApiHandler'>['request'], deadlineMs: number): Promise<HttpApiOutcome> {
    return this.call({ op: 'httpApiHandler', versionId: this.versionId, slug, request, deadlineMs }) as Promise<HttpApiOutcome>;
  }

  /** httpApiMapper[slug].responseMapper for the settled instance; see VersionIsolate.httpApiResponse. */
  httpApiResponse(slug: string, settled: RequestOf<'httpApiResponse'>['settled'], deadlineMs: number): Promise<HttpApiOutcome> {
    return this.call({ op: 'httpApiResponse', versionId: this.versionId, slug, settled, deadlineMs }) as Promise<HttpApiOutcome>;
  }

  stopChildren(key: string): Promise<{ id: string }[]> {
    return this.call({ op: 'stopChildren', versionId: this.versionId, key }) as Promise<{ id: string }[]>;
  }

  /** Drops the live actor (eviction, or rebuild after a failure); nothing to wait for. */
  stop(key: string): void {
    if (this.isHealthy) this.client.notify({ op: 'stop', versionId: this.versionId, key });
  }

  noteActivity(seq: number): void {
    this.seq = Math.max(this.seq, seq);
    this.wake((waiter) => waiter.since < this.seq);
  }

  markUnhealthy(): void {
    this.isHealthy = false;
    this.wake(() => true);
  }

  /** The worker was retired for a call of actor `key` (so this version is unhealthy now). */
  heldByOwnCall(key: string, stall: OwnStall): void {
    this.heldBy = { key, stall };
  }

  private call(request: SandboxRequest): Promise<unknown> {
    if (!this.isHealthy) {
      const own = this.heldBy !== undefined && 'key' in request && request.key === this.heldBy.key;
      return Promise.reject(new SandboxDisposedError(own ? this.heldBy?.stall : undefined));
    }
    return this.client.request(request);
  }

  private wake(due: (waiter: { since: number }) => boolean): void {
    const waking = this.waiters.filter(due);
    this.waiters = this.waiters.filter((waiter) => !due(waiter));
    for (const waiter of waking) waiter.resolve();
  }
}
