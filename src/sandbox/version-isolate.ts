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
import { randomBytes } from 'node:crypto';
import ivm from 'isolated-vm';
import {
  BundleValidationError,
  MachineCodeError,
  NoLiveActorError,
  SandboxDisposedError,
  SandboxTimeoutError,
  StepTooLargeError,
} from './errors.js';
import { IsolateModules } from './module-loader.js';
import { cryptoCallback, fetchCallback, logCallback, LogBudget, randomCallback } from './host-callbacks.js';
import { MAX_STEP_RESULT_CHARS } from './limits.js';
import { MAX_STATE_DEPTH, tooDeep } from '../domain/json-depth.js';
import { callSync, translateIsolateError, type CallArg, type CallLimits } from './isolate-call.js';
import { HostCalls, type HostCallOutcome } from './host-calls.js';
import { defaultEgressOptions, type EgressOptions, type Lookup } from './egress-policy.js';
import { parseStep, type RawStep, splitStep } from './step-result.js';
import {
  FETCH_SOURCE,
  GLOBALS_SOURCE,
  type HarnessArgs,
  type HarnessFn,
  SUBTLE_SOURCE,
  TAMPERED_MARKER,
  URL_SOURCE,
  isolateSettings,
} from './isolate-sources.js';
import type {
  AuthorizingCaller,
  CapturedLog,
  HttpApiOutcome,
  HttpApiRequest,
  HttpApiSettled,
  JsonObject,
  PersistedSnapshot,
  ReadManyRequest,
  ReadRequest,
  StartInit,
  Restore,
  StartOptions,
  StepResult,
  WriteRequest,
} from './types.js';

const DEFAULT_MEMORY_LIMIT_MB = 128;
const DEFAULT_CPU_LIMIT_MS = 1000;

interface LoadOptions {
  versionId: string;
  code: string;
  /** What machine code may use in one call (and the limit its memory errors name). */
  memoryLimitMb?: number;
  /**
   * Room for the live actors on top of `memoryLimitMb` (default 0: they share it). The isolate's V8
   * heap limit is the sum, so a call's machine code has its own limit whatever the live actors hold;
   * keeping them within their part is the runtime's job (worker/live-heap-watch.ts).
   */
  liveActorMemoryMb?: number;
  cpuLimitMs?: number;
  onLog?: (entry: CapturedLog) => void;
  /** Where machine code's fetch may go and its limits; default: no allow-list, 10 s, 5 MB. */
  egress?: EgressOptions;
  /** DNS resolution for fetch (tests); default node:dns lookup of all addresses. */
  dnsLookup?: Lookup;
  /**
   * Runs each delivery of a host call's outcome, which runs machine code outside any request (the
   * sandbox worker times it for its stall watchdog); default: runs it as is.
   */
  aroundDelivery?: (deliver: () => void) => void;
  /**
   * Let the actors of a machine that can leave nothing running but delayed events to itself rest
   * between steps as their state and timers alone, stepped by xstate's pure transition
   * (isolate/harness.js, pure steps); default true.
   */
  pureSteps?: boolean;
  /** A machine version (the default) or a migration bundle, whose exports are checked instead. */
  kind?: 'version' | 'migration';
}

/** What the bundle exports, as seen by the harness. */
interface BundleInfo {
  /** Set when the exports could not be read at all (then nothing else is). */
  loadError?: string;
  hasDefault: boolean;
  machine: 'v4' | 'v5' | 'none';
  definitionError: string | null;
  allowRead: boolean;
  allowWrite: boolean;
  /** A migration bundle's functions (wire-protocol §7.5). */
  upgradeState?: boolean;
  upgradeContext?: boolean;
}

/** What a migration is asked: the instance's leaf state paths, the paths its history states remember, its context. */
export interface MigrationInput {
  paths: string[][];
  remembered: string[][];
  context: JsonObject;
}

/** What a migration gives back: each path mapped (in order), and the new context. */
export type MigrationOutput = MigrationInput;

/** Why a migration bundle cannot be used, or undefined when it can. */
function migrationProblem(info: BundleInfo): string | undefined {
  if (typeof info.loadError === 'string') return info.loadError;
  if (!info.upgradeState) return 'upgradeState must be an exported function: upgradeState(oldStatePath, context) → newStatePath';
  if (!info.upgradeContext)
    return 'upgradeContext must be an exported function: upgradeContext(oldStatePaths, newStatePaths, oldContext) → newContext';
  return undefined;
}

type Fn = ivm.Reference<(...args: CallArg[]) => unknown>;
const HARNESS_EXPORTS = [
  'start',
  'authorizeAndStart',
  'send',
  'authorizeAndSend',
  'advance',
  'stopChildren',
  'stop',
  'collect',
  'recover',
  'inspect',
  'defaultContext',
  'authorize',
  'authorizeReads',
  'deliver',
  'afterDeliver',
  'takeDroppedLogs',
  'configure',
  'census',
  'httpCall',
  'httpCollect',
  'httpDrop',
  'migrate',
  'rememberedPaths5',
] as const satisfies readonly HarnessFn[];
/** Runs a crossing into the isolate, e.g. timed for a watchdog (see httpApiHandler). */
type Crossings = <T>(crossing: () => T) => T;
const runCrossing: Crossings = (crossing) => crossing();

/** Collects in a row that may each run due timers of an http API call before it must wait. */
const MAX_HTTP_TIMER_ROUNDS = 1_000;
type HarnessRefs = Record<(typeof HARNESS_EXPORTS)[number], Fn>;
type StepFn = 'start' | 'authorizeAndStart' | 'send' | 'authorizeAndSend' | 'advance';

/** The checks smply's validate-bundle makes (wire-protocol §7.1), as one message or undefined. */
function bundleProblem(info: BundleInfo): string | undefined {
  if (typeof info.loadError === 'string') return info.loadError;
  if (!info.hasDefault) return 'the bundle has no default export: it must `export default` an XState machine';
  if (info.machine !== 'v4' && info.machine !== 'v5') {
    return "the bundle's default export is not an XState machine: expected the result of createMachine from xstate 4 (an object with __xstatenode) or xstate 5 (a StateMachine, with getInitialSnapshot, transition and root)";
  }
  if (info.definitionError !== null) {
    return info.machine === 'v4'
      ? `the bundle's default export is not a usable XState v4 machine: reading machine.definition failed with ${info.definitionError}`
      : `the bundle's default export is not a usable XState v5 machine: ${info.definitionError}`;
  }
  if (!info.allowRead) return 'allowRead must be an exported function';
  if (!info.allowWrite) return 'allowWrite must be an exported function';
  return undefined;
}

export class VersionIsolate {
  private disposed = false;
  /** Actors whose machine code failed while a host call's outcome was delivered: their next step throws this. */
  private readonly deliveryFailures = new Map<string, Error>();
  /** Counts http API calls, to key each (see httpApi). */
  private httpCalls = 0;

  private constructor(
    readonly versionId: string,
    private readonly isolate: ivm.Isolate,
    private readonly context: ivm.Context,
    private readonly fns: HarnessRefs,
    private readonly limits: CallLimits,
    /** What the harness saw in the bundle (the load succeeded only if `bundleProblem` was undefined). */
    readonly info: BundleInfo,
    private readonly hostCalls: HostCalls,
    private readonly logs: LogBudget,
    private readonly aroundDelivery: LoadOptions['aroundDelivery'],
  ) {}

  /**
   * Creates the isolate, installs the globals, evaluates the bundle (top-level code runs under the
   * CPU limit) and checks its exports. Throws BundleValidationError for unusable code.
   */
  static async load(opts: LoadOptions): Promise<VersionIsolate> {
    const limits: CallLimits = {
      memoryLimitMb: opts.memoryLimitMb ?? DEFAULT_MEMORY_LIMIT_MB,
      cpuLimitMs: opts.cpuLimitMs ?? DEFAULT_CPU_LIMIT_MS,
    };
    const isolate = new ivm.Isolate({ memoryLimit: limits.memoryLimitMb + (opts.liveActorMemoryMb ?? 0) });
    const hostCalls = new HostCalls(opts.egress ?? defaultEgressOptions, opts.dnsLookup);
    const logs = new LogBudget(opts.versionId, opts.onLog);
    try {
      const context = await isolate.createContext();
      installGlobals(isolate, context, logs, hostCalls);
      const modules = new IsolateModules(isolate, context);
      const bundle = modules.compileBundle(opts.code);
      const harness = modules.loadHarness(limits.cpuLimitMs);
      const fns = {} as HarnessRefs;
      for (const name of HARNESS_EXPORTS) {
        fns[name] = harness.namespace.getSync(name, { reference: true }) as Fn;
      }
      logs.countIsolateDrops = () => (isolate.isDisposed ? 0 : Number(callSync(isolate, fns.takeDroppedLogs, [], limits)));
      if (modules.bundleImportsXstate5) modules.bindXstate5(limits.cpuLimitMs);
      modules.instantiateBundle();
      logs.begin();
      try {
        await evaluateBundle(bundle, isolate, limits);
      } finally {
        logs.end();
      }
      modules.bindEntry(limits.cpuLimitMs);
      let infoJson: string;
      logs.begin();
      try {
        infoJson = callSync(isolate, fns.inspect, [], limits);
      } finally {
        logs.end();
      }
      const info = JSON.parse(infoJson) as BundleInfo;
      // A machine of a bundled xstate 5 copy runs on the shared v5 copy's actors (isolate/harness.js).
      if (opts.kind !== 'migration' && info.machine === 'v5' && !modules.bundleImportsXstate5) modules.bindXstate5(limits.cpuLimitMs);
      const problem = opts.kind === 'migration' ? migrationProblem(info) : bundleProblem(info);
      if (problem !== undefined) throw new BundleValidationError(problem);
      if (opts.pureSteps === false) callSync(isolate, fns.configure, [JSON.stringify({ pureSteps: false })], limits);
      const vi = new VersionIsolate(opts.versionId, isolate, context, fns, limits, info, hostCalls, logs, opts.aroundDelivery);
      hostCalls.onComplete = (id, owner, outcome) => vi.deliver(id, owner, outcome);
      hostCalls.ready = true;
      return vi;
    } catch (e) {
      hostCalls.close();
      if (!isolate.isDisposed) isolate.dispose();
      // The bundle's top-level code tampered with what the harness relies on (see enterCall).
      if (e instanceof MachineCodeError && e.message.includes(TAMPERED_MARKER))
        throw new BundleValidationError(`the bundle's top-level code ${untampered(e.message).replace(/^machine code /, '')}`);
      throw e;
    }
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
   * Runs the version's `httpApiMapper[slug].handler(request)` (wire-protocol §3.14) to its end: an
   * async handler may wait for its fetches and timers, up to `deadlineMs` of wall-clock time (each
   * crossing into the isolate has the usual CPU limit). Machine code throwing is an outcome, not an
   * exception; the sandbox's own failures (CPU or memory limit) throw as for steps.
   */
  httpApiHandler(slug: string, request: HttpApiRequest, deadlineMs: number, around: Crossings = runCrossing): Promise<HttpApiOutcome> {
    return this.httpApi(slug, 'handler', request, '', deadlineMs, around);
  }

  /** `httpApiMapper[slug].responseMapper({ state, context, result })`, result computed from the final state's data. */
  httpApiResponse(slug: string, settled: HttpApiSettled, deadlineMs: number, around: Crossings = runCrossing): Promise<HttpApiOutcome> {
    return this.httpApi(slug, 'responseMapper', settled, settled.machineInstanceName, deadlineMs, around);
  }

  /** `around` runs each crossing into the isolate that may run machine code (the sandbox worker times them). */
  private async httpApi(
    slug: string,
    fn: 'handler' | 'responseMapper',
    input: unknown,
    name: string,
    deadlineMs: number,
    around: Crossings,
  ): Promise<HttpApiOutcome> {
    const cross = <K extends 'httpCall' | 'httpCollect'>(harnessFn: K, args: HarnessArgs<K>): string =>
      around(() => this.call(harnessFn, args));
    // Its own key (an actor key always has slashes): what it leaves behind is dropped by it, also when
    // the first crossing is cut short by the CPU limit.
    const key = `http-api:${++this.httpCalls}`;
    const deadline = Date.now() + deadlineMs;
    let finished = false;
    try {
      const started = JSON.parse(cross('httpCall', [key, slug, fn, JSON.stringify(input), Date.now(), name])) as {
        missing?: string;
        error?: string;
        started?: true;
      };
      if (started.started !== true) {
        finished = true;
        if (typeof started.missing === 'string') return { kind: 'missing', message: started.missing };
        return { kind: 'threw', message: started.error ?? 'the sandbox produced a malformed answer' };
      }
      for (;;) {
        const failed = this.deliveryFailures.get(key);
        if (failed !== undefined) throw failed;
        let text = cross('httpCollect', [key, Date.now()]);
        for (let round = 0; text === '{"pending":true,"fired":true}'; round++) {
          if (round >= MAX_HTTP_TIMER_ROUNDS)
            return { kind: 'threw', message: `its timers kept firing (${MAX_HTTP_TIMER_ROUNDS} rounds) without it finishing` };
          text = cross('httpCollect', [key, Date.now()]);
        }
        if (text.length > MAX_STEP_RESULT_CHARS)
          return {
            kind: 'threw',
            message: `its result is too large: ${text.length} characters of JSON (at most ${MAX_STEP_RESULT_CHARS})`,
          };
        if (tooDeep(text, MAX_STATE_DEPTH + 1))
          return { kind: 'threw', message: `its result nests objects and arrays more than ${MAX_STATE_DEPTH} levels deep` };
        const collected = JSON.parse(text) as { value?: unknown; error?: string; pending?: true; nextDueAt?: number | null };
        if (collected.pending !== true) {
          finished = true;
          return typeof collected.error === 'string'
            ? { kind: 'threw', message: collected.error }
            : { kind: 'returned', value: collected.value };
        }
        const now = Date.now();
        if (now >= deadline) return { kind: 'threw', message: `it did not finish within ${deadlineMs} ms` };
        if ((collected.nextDueAt ?? null) === null && this.hostCalls.pendingFor(key) === 0) {
          return {
            kind: 'threw',
            message: 'it returned a promise that nothing of it can settle any more (it has no timer or fetch pending)',
          };
        }
        // Read right after the collect (nothing is delivered in between): a completion after it wakes us.
        const seq = this.hostCalls.activitySeq;
        await waitUntil(this.hostCalls.nextActivity(seq), Math.min(deadline, collected.nextDueAt ?? Infinity) - now);
        if (!this.healthy) throw new SandboxDisposedError();
      }
    } finally {
      this.hostCalls.drop(key);
      this.deliveryFailures.delete(key);
      if (!finished && this.healthy) {
        try {
          this.call('httpDrop', [key]);
        } catch {
          // the isolate will be rebuilt by the caller if it is unusable
        }
      }
    }
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

  /** Hands a completed host call's outcome (copied data only) to the isolate; see the class comment. */
  private deliver(id: number, owner: string | null, outcome: HostCallOutcome): void {
    if (!this.healthy) return;
    const head =
      'error' in outcome
        ? { error: outcome.error }
        : {
            status: outcome.ok.status,
            statusText: outcome.ok.statusText,
            url: outcome.ok.url,
            redirected: outcome.ok.redirected,
            headers: outcome.ok.headers,
          };
    try {
      let body: ivm.Copy<ArrayBuffer> | undefined;
      if ('ok' in outcome) {
        const bytes = outcome.ok.body;
        const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
        body = new ivm.ExternalCopy(buffer).copyInto({ release: true });
      }
      const run = () => {
        this.call('deliver', [id, JSON.stringify(head), body, Date.now()]);
        this.call('afterDeliver', []);
      };
      if (this.aroundDelivery) this.aroundDelivery(run);
      else run();
    } catch (e) {
      const error = e instanceof Error ? e : new MachineCodeError(String(e));
      if (owner !== null) {
        this.deliveryFailures.set(owner, error);
        this.hostCalls.drop(owner);
        try {
          if (this.healthy) this.call('stop', [owner]);
        } catch {
          // the isolate will be rebuilt by the caller if it is unusable
        }
      }
    }
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

function installGlobals(isolate: ivm.Isolate, context: ivm.Context, logs: LogBudget, hostCalls: HostCalls): void {
  const runInstaller = (source: string, filename: string, args: (ivm.Callback | string)[]): void => {
    const fn = isolate.compileScriptSync(source, { filename }).runSync(context, { reference: true }) as ivm.Reference<
      (...a: (ivm.Callback | string)[]) => void
    >;
    fn.applySync(undefined, args);
    fn.release();
  };
  const nonce = randomBytes(6).toString('hex');
  runInstaller(GLOBALS_SOURCE, 'file:///statehold/globals.js', [logCallback(logs), randomCallback(), nonce, isolateSettings()]);
  isolate.compileScriptSync(URL_SOURCE, { filename: 'file:///statehold/url.js' }).runSync(context);
  runInstaller(FETCH_SOURCE, 'file:///statehold/fetch.js', [fetchCallback(hostCalls.start)]);
  runInstaller(SUBTLE_SOURCE, 'file:///statehold/subtle.js', [cryptoCallback()]);
}

/** Resolves when `activity` does or `ms` passed, whichever comes first. */
const waitUntil = async (activity: Promise<void>, ms: number): Promise<void> => {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([activity, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  } finally {
    clearTimeout(timer);
  }
};

/** The harness's tampering message without its marker. */
const untampered = (message: string): string => message.slice(message.indexOf(TAMPERED_MARKER) + TAMPERED_MARKER.length);

const NOT_AN_ERROR = /^An object was thrown from supplied code within isolated-vm, but that object was not an instance of `Error`/;

async function evaluateBundle(bundle: ivm.Module, isolate: ivm.Isolate, limits: CallLimits): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    // top-level await on something that never settles (e.g. a host-clock timer) must not hang the load
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new BundleValidationError("the bundle's top-level code did not finish (top-level await never settled)")),
        limits.cpuLimitMs + 5000,
      );
    });
    await Promise.race([bundle.evaluate({ timeout: limits.cpuLimitMs }), stuck]);
  } catch (e) {
    if (e instanceof BundleValidationError) throw e;
    const t = translateIsolateError(e, isolate, limits);
    if (t instanceof SandboxTimeoutError) {
      throw new BundleValidationError(`the bundle's top-level code exceeded the CPU time limit of ${limits.cpuLimitMs} ms`);
    }
    if (t instanceof MachineCodeError) {
      // isolated-vm's words for a thrown object or symbol, which it cannot copy out, name it and not the bundle.
      const what = NOT_AN_ERROR.test(t.message) ? 'a value that is not an Error (an object or a symbol)' : t.message;
      throw new BundleValidationError(`the bundle threw while loading: ${what}`);
    }
    throw t;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
