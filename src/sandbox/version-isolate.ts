/**
 * One isolate per machine version, shared by that version's live actors (design.md §5).
 *
 * Hot path: every method below is synchronous, JSON in / JSON out, two applySync crossings per step
 * (the mutating call, then `collect` once the isolate drained its microtasks).
 *
 * Timers: nothing inside the isolate fires by itself. `after` delays, delayed sends and machine code's
 * own setTimeout/setInterval are recorded against the host clock and listed in
 * `StepResult.pendingTimers` with their due time; the runtime fires them by calling
 * `advance(key, nowMs)`. Event timers (kind "event") are persistable: a snapshot deliberately
 * carries no actions (so rehydrating never re-runs entry actions, re-invokes services or re-arms
 * timers by itself), and `start(key, { snapshot, pendingTimers })` re-arms the listed event timers
 * with their original ids and due times, which reproduces the same future behaviour (and
 * `cancel(sendId)` still cancels them). Callback timers belong to running services and are not
 * persisted: services do not survive a restart (§8.1: they are stopped and get error.platform, or
 * xstate.error.actor for v5 machines; see snapshot.ts childStoppedEvent).
 *
 * Host calls (fetch): machine code's fetch is started on the host (host-calls.ts, host-fetch.ts) and
 * attributed to the actor running at the time. Its outcome is delivered later by a sync call into the
 * isolate (`deliver` then `afterDeliver`, under the CPU limit), outside any step: the actor may
 * transition then. `nextActivity()` resolves after such a delivery so the runtime can `advance` to
 * collect the new state; `StepResult.pendingHostCalls` counts the actor's calls still in flight (an
 * actor with calls in flight is not settled). Stopping an actor (or its children) drops its calls.
 * If machine code fails while a delivery runs, the actor is discarded and its next step throws.
 *
 * Failures: machine code throwing during a step → MachineCodeError and the actor is discarded (the
 * runtime restarts it from the last committed snapshot); CPU-time limit → SandboxTimeoutError, the
 * actor is discarded, the isolate kept; memory limit → SandboxMemoryError, the isolate is gone
 * (`healthy` false) and the caller loads the version again.
 *
 * Bounds (limits.ts): console output per call (every crossing below opens a LogBudget window), pending
 * timers and delayed events per actor (inside the isolate), and the size of a step result.
 */
import type ivm from 'isolated-vm';
import { MachineCodeError, NoLiveActorError, SandboxTimeoutError, StepTooLargeError } from './errors.js';
import type { LogBudget } from './host-callbacks.js';
import { MAX_STEP_RESULT_CHARS } from './limits.js';
import { MAX_STATE_DEPTH, tooDeep } from '../domain/json-depth.js';
import { callSync, type CallArg, type CallLimits } from './isolate-call.js';
import type { HostCalls } from './host-calls.js';
import { deliverHostCallOutcome, type DeliveringIsolate } from './host-call-delivery.js';
import { type Crossings, runCrossing, runHttpApiCall } from './http-api-call.js';
import { parseStep, type RawStep, splitStep } from './step-result.js';
import { type HarnessArgs, type HarnessFn, TAMPERED_MARKER, untampered } from './isolate-sources.js';
import { type BundleInfo, type HarnessRefs, loadVersion, type LoadOptions } from './version-loading.js';
import type {
  AuthorizingCaller,
  HttpApiOutcome,
  HttpApiRequest,
  HttpApiSettled,
  JsonObject,
  MachineDefinition,
  PersistedSnapshot,
  ReadManyRequest,
  ReadRequest,
  StartInit,
  Restore,
  StartOptions,
  StepResult,
  WriteRequest,
} from './types.js';

/** What a migration is asked: the instance's leaf state paths, the paths its history states remember, its context. */
export interface MigrationInput {
  paths: string[][];
  remembered: string[][];
  context: JsonObject;
}

/** What a migration gives back: each path mapped (in order), and the new context. */
export type MigrationOutput = MigrationInput;

type StepFn = 'start' | 'authorizeAndStart' | 'send' | 'authorizeAndSend' | 'advance';

export class VersionIsolate {
  private disposed = false;
  /** Actors whose machine code failed while a host call's outcome was delivered: their next step throws this. */
  private readonly deliveryFailures = new Map<string, Error>();
  /** Counts http API calls, to key each (see nextHttpApiKey). */
  private httpCalls = 0;
  /** What delivering a host call's outcome (host-call-delivery.ts) and an http API call use of this isolate. */
  private readonly delivering: DeliveringIsolate;

  private constructor(
    readonly versionId: string,
    private readonly isolate: ivm.Isolate,
    private readonly context: ivm.Context,
    private readonly fns: HarnessRefs,
    private readonly limits: CallLimits,
    /** What the harness saw in the bundle (the load succeeded only if it raised no problem). */
    readonly info: BundleInfo,
    private readonly hostCalls: HostCalls,
    private readonly logs: LogBudget,
    aroundDelivery: LoadOptions['aroundDelivery'],
  ) {
    this.delivering = {
      healthy: () => this.healthy,
      call: (fn, args) => this.call(fn, args),
      hostCalls,
      deliveryFailures: this.deliveryFailures,
      aroundDelivery,
    };
  }

  /**
   * Creates the isolate, installs the globals, evaluates the bundle (top-level code runs under the
   * CPU limit) and checks its exports (version-loading.ts). Throws BundleValidationError for unusable code.
   */
  static async load(opts: LoadOptions): Promise<VersionIsolate> {
    const { isolate, context, fns, limits, info, hostCalls, logs } = await loadVersion(opts);
    const vi = new VersionIsolate(opts.versionId, isolate, context, fns, limits, info, hostCalls, logs, opts.aroundDelivery);
    hostCalls.onComplete = (id, owner, outcome) => deliverHostCallOutcome(vi.delivering, id, owner, outcome);
    hostCalls.ready = true;
    return vi;
  }

  /** False once the isolate is gone (memory limit, or disposed). */
  get healthy(): boolean {
    return !this.disposed && !this.isolate.isDisposed;
  }

  /** Runs a migration bundle's functions (loaded with kind 'migration') over an instance's paths and context. */
  migrate(input: MigrationInput): MigrationOutput {
    return JSON.parse(this.call('migrate', [JSON.stringify(input)])) as MigrationOutput;
  }

  /**
   * The state paths a v5 instance's history states remember, from its persisted snapshot (an upgrade's
   * migrations are given them): only this version's machine resolves the state node ids it holds.
   */
  rememberedPaths5(snapshot: PersistedSnapshot): string[][] {
    return JSON.parse(this.call('rememberedPaths5', [JSON.stringify(snapshot)])) as string[][];
  }

  allowRead(req: ReadRequest): boolean {
    return this.call('authorize', ['read', JSON.stringify(req)]) === 'true';
  }

  /** allowRead of one state for several auth contexts, in one call (its CPU limit covers them all). */
  allowReads(req: ReadManyRequest): boolean[] {
    const request = JSON.stringify({ machineInstanceName: req.machineInstanceName, authContexts: req.authContexts });
    const verdicts = String(this.call('authorizeReads', [request, JSON.stringify(req.state), JSON.stringify(req.context)]));
    return req.authContexts.map((_, i) => verdicts[i] === '1');
  }

  allowWrite(req: WriteRequest): boolean {
    return this.call('authorize', ['write', JSON.stringify(req)]) === 'true';
  }

  /** The machine's own initial context (JSON copy); `start` shallow-merges the given context over it. */
  defaultContext(): JsonObject {
    return JSON.parse(this.call('defaultContext', [])) as JsonObject;
  }

  /**
   * The machine's states and transitions as plain, bounded data (harness-version-info.js `definition`), for the web
   * console's drawing: keys, ids, types, initial states, tags, transitions' events and target ids.
   */
  definition(): MachineDefinition {
    const parsed = JSON.parse(this.call('definition', [])) as MachineDefinition | { error: string };
    if ('error' in parsed) throw new MachineCodeError(parsed.error);
    return parsed;
  }

  /**
   * Creates a live actor: from a context (entry actions run, services start) or from a persisted
   * snapshot (nothing re-runs; event timers in `init.pendingTimers` are re-armed). Replaces any live
   * actor with the same key.
   */
  start(instanceKey: string, init: StartInit, opts: StartOptions = {}): StepResult {
    return parseStep(this.startRaw(instanceKey, init, opts));
  }

  /** Delivers one external event; `restore` first restores the actor (see Restore). */
  send(instanceKey: string, event: { type: string; [key: string]: unknown }, nowMs: number = Date.now(), restore?: Restore): StepResult {
    return parseStep(this.sendRaw(instanceKey, event, nowMs, restore));
  }

  /**
   * allowWrite for `event` against the live actor's state (which is the committed state), then the
   * event when it allows, in one crossing; `'rejected'` when it refuses (the actor is untouched).
   */
  sendAuthorized(
    instanceKey: string,
    caller: AuthorizingCaller,
    event: { type: string; [key: string]: unknown },
    nowMs: number = Date.now(),
    restore?: Restore,
  ): StepResult | 'rejected' {
    const raw = this.sendAuthorizedRaw(instanceKey, caller, event, nowMs, restore);
    return raw === 'rejected' ? raw : parseStep(raw);
  }

  /** Fires this actor's timers due at `nowMs` (earliest first; chains of delays catch up). */
  advance(instanceKey: string, nowMs: number, restore?: Restore): StepResult {
    return parseStep(this.advanceRaw(instanceKey, nowMs, restore));
  }

  /**
   * Runs the version's `httpApiMapper[slug].handler(request)` (wire-protocol §3.14, http-api-call.ts) to its end: an
   * async handler may wait for its fetches and timers, up to `deadlineMs` of wall-clock time (each
   * crossing into the isolate has the usual CPU limit). Machine code throwing is an outcome, not an
   * exception; the sandbox's own failures (CPU or memory limit) throw as for steps.
   */
  httpApiHandler(slug: string, request: HttpApiRequest, deadlineMs: number, around: Crossings = runCrossing): Promise<HttpApiOutcome> {
    return runHttpApiCall(this.delivering, this.nextHttpApiKey(), slug, 'handler', request, '', deadlineMs, around);
  }

  /** `httpApiMapper[slug].responseMapper({ state, context, result })`, result computed from the final state's data. */
  httpApiResponse(slug: string, settled: HttpApiSettled, deadlineMs: number, around: Crossings = runCrossing): Promise<HttpApiOutcome> {
    return runHttpApiCall(
      this.delivering,
      this.nextHttpApiKey(),
      slug,
      'responseMapper',
      settled,
      settled.machineInstanceName,
      deadlineMs,
      around,
    );
  }

  /** Each http API call's own key (an actor key always has slashes): see runHttpApiCall. */
  private nextHttpApiKey(): string {
    return `http-api:${++this.httpCalls}`;
  }

  /** How many live actors rest without an interpreter (pure steps) and how many have one. */
  census(): { resting: number; interpreters: number } {
    return JSON.parse(this.call('census', [])) as { resting: number; interpreters: number };
  }

  /** The step methods above, with the result left as the harness's JSON texts (what the sandbox worker sends on). */
  startRaw(instanceKey: string, init: StartInit, opts: StartOptions = {}): RawStep {
    this.forgetPast(instanceKey);
    const name = opts.machineInstanceName ?? instanceKey;
    return this.step(instanceKey, 'start', [instanceKey, name, JSON.stringify(init), opts.nowMs ?? Date.now()]);
  }

  /** allowWrite for the new instance (`request`), then `start` when it allows, in one crossing. */
  startAuthorizedRaw(instanceKey: string, init: StartInit, request: WriteRequest, opts: StartOptions = {}): RawStep | 'rejected' {
    this.forgetPast(instanceKey);
    const name = opts.machineInstanceName ?? instanceKey;
    return this.step(instanceKey, 'authorizeAndStart', [
      instanceKey,
      name,
      JSON.stringify(init),
      opts.nowMs ?? Date.now(),
      JSON.stringify(request),
    ]);
  }

  sendRaw(instanceKey: string, event: { type: string; [key: string]: unknown }, nowMs: number = Date.now(), restore?: Restore): RawStep {
    return this.step(instanceKey, 'send', [instanceKey, JSON.stringify(event), nowMs, this.restoring(instanceKey, restore)]);
  }

  sendAuthorizedRaw(
    instanceKey: string,
    caller: AuthorizingCaller,
    event: { type: string; [key: string]: unknown },
    nowMs: number = Date.now(),
    restore?: Restore,
  ): RawStep | 'rejected' {
    return this.step(instanceKey, 'authorizeAndSend', [
      instanceKey,
      JSON.stringify(caller),
      JSON.stringify(event),
      nowMs,
      this.restoring(instanceKey, restore),
    ]);
  }

  advanceRaw(instanceKey: string, nowMs: number, restore?: Restore): RawStep {
    return this.step(instanceKey, 'advance', [instanceKey, nowMs, this.restoring(instanceKey, restore)]);
  }

  /** The restore argument of a step call ('' for none); a restored actor starts afresh, as with start. */
  private restoring(instanceKey: string, restore: Restore | undefined): string {
    if (restore === undefined) return '';
    this.forgetPast(instanceKey);
    return JSON.stringify(restore);
  }

  /**
   * Stops the actor's running services (promises, callbacks, child machines) and the timers their code
   * set; returns their ids so the runtime can deliver their error event (snapshot.ts childStoppedEvent)
   * before the next event.
   */
  stopChildren(instanceKey: string): { id: string }[] {
    this.hostCalls.drop(instanceKey);
    const r = this.callForActor(instanceKey, 'stopChildren', [instanceKey]);
    if (r === 'no-actor') throw new NoLiveActorError(instanceKey);
    return (JSON.parse(r) as string[]).map((id) => ({ id: String(id) }));
  }

  /** Drops the live actor without running exit actions (eviction, or rebuild after a failure). */
  stop(instanceKey: string): void {
    this.forgetPast(instanceKey);
    if (this.healthy) this.call('stop', [instanceKey]);
  }

  /**
   * Resolves the next time a host call of this isolate (a fetch, by any actor) completes and its
   * outcome was delivered, or at once when one completed after `since` (a value of `activitySeq`
   * read earlier) or the isolate is disposed. Call it right after the step whose result you act on,
   * or pass the `activitySeq` read then, so a completion in between is not missed.
   */
  nextActivity(since?: number): Promise<void> {
    return this.hostCalls.nextActivity(since);
  }

  /** Counts host-call completions; see nextActivity. */
  get activitySeq(): number {
    return this.hostCalls.activitySeq;
  }

  /** Host calls in flight for this whole isolate. */
  get hostCallsInFlight(): number {
    return this.hostCalls.inFlight;
  }

  dispose(): void {
    this.hostCalls.close();
    this.disposed = true;
    this.context.release();
    if (!this.isolate.isDisposed) this.isolate.dispose();
  }

  /** CPU time machine code (and the harness) ran in this isolate so far, in ns (≈ 0.2 µs to read); undefined once it is gone. */
  cpuTimeNs(): bigint | undefined {
    if (!this.healthy) return undefined;
    try {
      return this.isolate.cpuTime;
    } catch {
      return undefined;
    }
  }

  /** Heap use of the isolate (≈ 6 µs to read here), for memory-bounded eviction decisions. */
  heapUsedBytes(): number {
    return this.healthy ? this.isolate.getHeapStatisticsSync().used_heap_size : 0;
  }

  private step<K extends 'start' | 'send' | 'advance'>(instanceKey: string, fn: K, args: HarnessArgs<K>): RawStep;
  private step<K extends 'authorizeAndSend' | 'authorizeAndStart'>(instanceKey: string, fn: K, args: HarnessArgs<K>): RawStep | 'rejected';
  private step<K extends StepFn>(instanceKey: string, fn: K, args: HarnessArgs<K>): RawStep | 'rejected' {
    try {
      this.throwDeliveryFailure(instanceKey);
      const stepped = this.callForActor(instanceKey, fn, args);
      if (stepped === 'no-actor') throw new NoLiveActorError(instanceKey);
      if (stepped === 'rejected') return 'rejected';
      // collect is a second crossing on purpose: isolated-vm drains the isolate's microtasks when a
      // call returns, so only now does the result include promises that resolved during the step.
      return this.stepResult(instanceKey, this.callForActor(instanceKey, 'collect', [instanceKey]));
    } catch (e) {
      // the actor is gone (discarded inside the isolate): its host calls must not outlive it
      this.hostCalls.drop(instanceKey);
      throw e;
    }
  }

  /**
   * An actor (re)started here begins afresh: its earlier host calls and a failure of their delivery no
   * longer concern it (so a start, or a step that restores, never throws that failure).
   */
  private forgetPast(instanceKey: string): void {
    this.hostCalls.drop(instanceKey);
    this.deliveryFailures.delete(instanceKey);
  }

  private throwDeliveryFailure(instanceKey: string): void {
    const failed = this.deliveryFailures.get(instanceKey);
    if (failed !== undefined) {
      this.deliveryFailures.delete(instanceKey);
      throw failed;
    }
  }

  private stepResult(instanceKey: string, json: string): RawStep {
    if (json === 'no-actor') throw new NoLiveActorError(instanceKey);
    if (json.length > MAX_STEP_RESULT_CHARS) {
      // checked before parsing: the actor was not discarded inside the isolate, so drop it too
      this.dropActor(instanceKey);
      throw new StepTooLargeError(
        `the machine's state is too large to persist: ${Buffer.byteLength(json)} bytes (at most ${MAX_STEP_RESULT_CHARS})`,
      );
    }
    const raw = splitStep(json, this.hostCalls.pendingFor(instanceKey));
    if (raw) {
      if (tooDeep(raw.rest, MAX_STATE_DEPTH) || tooDeep(raw.context, MAX_STATE_DEPTH) || tooDeep(raw.snapshot, MAX_STATE_DEPTH)) {
        this.dropActor(instanceKey);
        throw new StepTooLargeError(
          `the machine's state nests objects and arrays more than ${MAX_STATE_DEPTH} levels deep, which cannot be persisted`,
        );
      }
      raw.maxDepth = MAX_STATE_DEPTH;
      return raw;
    }
    // Not a result: the harness's answer for a failed step or a missing actor.
    const parsed = JSON.parse(json) as unknown;
    if (parsed !== null && typeof parsed === 'object') {
      const p = parsed as { noActor?: unknown; error?: unknown };
      if (p.noActor === true) throw new NoLiveActorError(instanceKey);
      if (typeof p.error === 'string') throw new MachineCodeError(p.error);
    }
    throw new MachineCodeError('the sandbox produced a malformed step result');
  }

  /** A call on behalf of one actor: if it is cut short, that actor is dropped (it cannot be trusted). */
  private callForActor<K extends HarnessFn>(instanceKey: string, fn: K, args: HarnessArgs<K>): string {
    try {
      return this.call(fn, args);
    } catch (e) {
      if (e instanceof SandboxTimeoutError && this.healthy) {
        try {
          this.call('stop', [instanceKey]);
        } catch {
          // the isolate will be rebuilt by the caller if it is unusable
        }
      }
      throw e;
    }
  }

  private call<K extends HarnessFn>(fn: K, args: HarnessArgs<K>): string {
    this.logs.begin();
    try {
      return callSync(this.isolate, this.fns[fn], args as CallArg[], this.limits);
    } catch (e) {
      if (e instanceof MachineCodeError && e.message.includes(TAMPERED_MARKER)) {
        // Nothing in this isolate can be trusted any more: free it; the version is loaded afresh on
        // the next call (the worker reports it unhealthy) and its actors are rebuilt from their heads.
        this.dispose();
        throw new MachineCodeError(untampered(e.message));
      }
      if (e instanceof SandboxTimeoutError && this.healthy) {
        try {
          callSync(this.isolate, this.fns.recover, [], this.limits);
        } catch {
          // see above
        }
      }
      throw e;
    } finally {
      this.logs.end();
    }
  }

  /** Discards a live actor whose step result the host refused (best effort). */
  private dropActor(instanceKey: string): void {
    this.hostCalls.drop(instanceKey);
    try {
      if (this.healthy) this.call('stop', [instanceKey]);
    } catch {
      // the isolate will be rebuilt by the caller if it is unusable
    }
  }
}
