/**
 * The node's side of the sandbox worker (sandbox-worker.ts): forks it when told to start or on first
 * use, matches answers to requests, and, when it dies (machine code can crash V8 itself, e.g. one huge
 * allocation), fails what was in flight with SandboxCrashedError and starts a new one (at once, or on
 * the next call). Versions loaded in a dead worker report `healthy === false`, so their users load
 * them again and rebuild actors.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { BundleValidation } from '../bundle-validation.js';
import { BundleValidationError, MachineCodeError, NoLiveActorError, SandboxDisposedError, SandboxMemoryError, SandboxTimeoutError, StepTooLargeError } from '../errors.js';
import type { AuthorizingCaller, CapturedLog, ReadRequest, StartInit, StartOptions, StepResult, WriteRequest } from '../types.js';
import { parseStep, type RawStep } from '../step-result.js';
import type { Batch, LoadSettings, NodeMessage, SandboxRequest, SerializedError, WorkerMessage } from './protocol.js';

const WORKER_SCRIPT = fileURLToPath(new URL('./sandbox-worker.js', import.meta.url));

/** Hosts with at most this many cores run the worker's garbage collector on its own thread only. */
const SMALL_HOST_CORES = 2;

/**
 * V8 flags a worker gets before the operator's (`nodeArgs`, which come after and may undo them, e.g.
 * `--no-single-threaded-gc`).
 *
 * Why single-threaded GC on a small host: the worker runs isolates one call at a time on its main
 * thread, but V8 marks and compacts an isolate's heap with helper threads (four per process). Its
 * isolates' old generation fills every ≈ 0.6 s at 64 requests in flight, and each full collection then
 * put those helpers on both cores at once for ≈ 10 ms: the node's main thread had no core and every
 * request in flight stalled (seen with perf, 2026-11-25: the slowest 1 % of answers came in such
 * stalls). With the flag the same work is done in steps of ≤ 2–4 ms on the worker's own thread. On 2
 * cores, c64: p99 16.6–20.1 ms against 19.3–22.6 in 7 alternating pairs, the worker ≈ 3 µs per event
 * cheaper. Not measured on larger hosts, where the helpers have cores of their own: V8's default stays.
 */
export const defaultWorkerNodeArgs = (cores: number = availableParallelism()): string[] => (cores <= SMALL_HOST_CORES ? ['--single-threaded-gc'] : []);

/** The worker running a request died before answering: the request had no effect. */
export class SandboxCrashedError extends MachineCodeError {
  /**
   * SIGKILL comes from outside (an operator, the kernel's OOM killer): V8 and machine code end a
   * process with SIGABRT, SIGSEGV, SIGTRAP or an exit code, never with SIGKILL.
   */
  readonly killedFromOutside: boolean;

  constructor(reason: string) {
    const killed = reason === 'killed by SIGKILL';
    super(
      killed
        ? 'the sandbox worker was killed (SIGKILL) from outside the node while running this request; nothing was applied: retry'
        : `the machine's code crashed its sandbox worker (${reason}); nothing was applied`,
    );
    this.name = 'SandboxCrashedError';
    this.killedFromOutside = killed;
  }
}

export interface SandboxClientOptions {
  onLog: (versionId: string, entry: CapturedLog) => void;
  onCrash?: (reason: string) => void;
  /** What this worker is for, passed on its command line so `ps` tells the node's workers apart. */
  role?: string;
  /** More Node/V8 flags for the worker process (profiling, GC tracing: STATEHOLD_SANDBOX_NODE_ARGS). */
  nodeArgs?: string[];
  /**
   * Start a new worker as soon as one dies, instead of on the next call (after a worker that died
   * young, with a growing delay, so a worker that cannot start is not forked in a tight loop).
   */
  restartAfterCrash?: boolean;
}

/** A worker that dies sooner than this after it started counts as dying young (see restartAfterCrash). */
const YOUNG_MS = 10_000;
const MAX_RESTART_DELAY_MS = 30_000;

type Event = { type: string; [key: string]: unknown };

export class SandboxClient {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private readonly versions = new Map<string, RemoteVersion>();
  private closed = false;
  private spawnedAt = 0;
  /** Workers in a row that died young, for the restart delay. */
  private youngDeaths = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Requests made during this turn of the event loop, sent as one batch in its check phase. */
  private outgoing: NodeMessage[] = [];
  private flushScheduled = false;

  constructor(private readonly options: SandboxClientOptions) {}

  /**
   * Forks the worker now if none runs, so the first request does not wait for it to boot (≈ 0.4 s here:
   * a Node process, isolated-vm and the sandbox sources).
   */
  start(): void {
    if (!this.closed && !this.child) this.spawn();
  }

  /** Loads a version into the worker; BundleValidationError and friends come back typed. */
  async load(versionId: string, code: string, settings: LoadSettings): Promise<RemoteVersion> {
    this.versions.get(versionId)?.markUnhealthy();
    const version = new RemoteVersion(versionId, this);
    this.versions.set(versionId, version);
    try {
      await this.request({ op: 'load', versionId, code, settings });
    } catch (error) {
      version.markUnhealthy();
      if (this.versions.get(versionId) === version) this.versions.delete(versionId);
      throw error;
    }
    return version;
  }

  /** Frees a version's isolate (its machine was deleted); calls on it fail from now on. */
  unload(versionId: string): void {
    const version = this.versions.get(versionId);
    if (!version) return;
    version.markUnhealthy();
    this.versions.delete(versionId);
    if (this.child && !this.closed) this.request({ op: 'unload', versionId }).catch(() => undefined);
  }

  /** Checks a bundle in the worker; a bundle that crashes the worker is reported, not fatal. */
  async validate(code: string, settings: LoadSettings): Promise<BundleValidation> {
    try {
      return (await this.request({ op: 'validate', code, settings })) as BundleValidation;
    } catch (error) {
      if (error instanceof SandboxCrashedError) return { ok: false, error: `the bundle's top-level code crashed the sandbox (${error.message})` };
      throw error;
    }
  }

  request(request: SandboxRequest): Promise<unknown> {
    if (this.closed) return Promise.reject(new SandboxDisposedError());
    this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.outgoing.push({ id, request });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    const batch: Batch<NodeMessage> = this.outgoing;
    this.outgoing = [];
    const child = this.child;
    if (batch.length === 0 || !child) return;
    child.send(batch, (error) => {
      if (!error) return;
      for (const { id } of batch) {
        const waiting = this.pending.get(id);
        if (waiting && this.pending.delete(id)) waiting.reject(new SandboxCrashedError(error.message));
      }
    });
  };

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.disconnect();
    const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
    await exited;
    clearTimeout(timer);
  }

  private spawn(): ChildProcess {
    const child = fork(WORKER_SCRIPT, this.options.role ? [this.options.role] : [], {
      execArgv: ['--no-node-snapshot', ...defaultWorkerNodeArgs(), ...(this.options.nodeArgs ?? [])],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child = child;
    this.spawnedAt = Date.now();
    child.on('message', (batch: Batch<WorkerMessage>) => {
      for (const message of batch) this.received(message);
    });
    child.once('exit', (code, signal) => this.lost(child, signal ? `killed by ${signal}` : `exit code ${code}`));
    // fork failing (EAGAIN, ENOMEM) or the channel breaking: the same as a crash, without 'exit'.
    child.on('error', (error) => this.lost(child, error.message));
    return child;
  }

  /** The worker is gone: fail what it was running; its versions must be loaded again. */
  private lost(child: ChildProcess, reason: string): void {
    if (this.child !== child) return;
    this.child = undefined;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const { reject } of this.pending.values()) reject(new SandboxCrashedError(reason));
    this.pending.clear();
    // Not yet sent: they were meant for the dead worker's isolates, which are gone.
    this.outgoing = [];
    for (const version of this.versions.values()) version.markUnhealthy();
    this.versions.clear();
    if (this.closed) return;
    this.options.onCrash?.(reason);
    if (!this.options.restartAfterCrash) return;
    this.youngDeaths = Date.now() - this.spawnedAt < YOUNG_MS ? this.youngDeaths + 1 : 0;
    const delayMs = this.youngDeaths === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 250 * 2 ** (this.youngDeaths - 1));
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => this.start(), delayMs);
    this.restartTimer.unref();
  }

  private received(message: WorkerMessage): void {
    switch (message.kind) {
      case 'response': {
        const waiting = this.pending.get(message.id);
        if (!waiting) return;
        this.pending.delete(message.id);
        if (message.ok) waiting.resolve(message.value);
        else waiting.reject(rebuild(message.error));
        return;
      }
      case 'log':
        this.options.onLog(message.versionId, message.entry);
        return;
      case 'activity':
        this.versions.get(message.versionId)?.noteActivity(message.seq);
        return;
      case 'unhealthy':
        this.versions.get(message.versionId)?.markUnhealthy();
        this.versions.delete(message.versionId);
        return;
    }
  }
}

/**
 * A machine version loaded in the worker: the same operations as VersionIsolate, asynchronous. Per
 * instance, callers keep the order of their calls (the runtime's mailbox does).
 */
export class RemoteVersion {
  private isHealthy = true;
  private seq = 0;
  private waiters: Array<{ since: number; resolve: () => void }> = [];

  constructor(
    readonly versionId: string,
    private readonly client: SandboxClient,
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

  allowRead(request: ReadRequest): Promise<boolean> {
    return this.call({ op: 'allowRead', versionId: this.versionId, request }) as Promise<boolean>;
  }

  allowWrite(request: WriteRequest): Promise<boolean> {
    return this.call({ op: 'allowWrite', versionId: this.versionId, request }) as Promise<boolean>;
  }

  async start(key: string, init: StartInit, options: StartOptions): Promise<StepResult> {
    return parseStep((await this.call({ op: 'start', versionId: this.versionId, key, init, options })) as RawStep);
  }

  async send(key: string, event: Event, now: number): Promise<StepResult> {
    return parseStep((await this.call({ op: 'send', versionId: this.versionId, key, event, now })) as RawStep);
  }

  /**
   * allowWrite (against the live actor's state, which is the committed one) and, when it allows, the
   * event, in one round trip; 'rejected' leaves the actor as it was.
   */
  async sendAuthorized(key: string, caller: AuthorizingCaller, event: Event, now: number): Promise<StepResult | 'rejected'> {
    const raw = (await this.call({ op: 'sendAuthorized', versionId: this.versionId, key, caller, event, now })) as RawStep | 'rejected';
    return raw === 'rejected' ? raw : parseStep(raw);
  }

  async advance(key: string, now: number): Promise<StepResult> {
    return parseStep((await this.call({ op: 'advance', versionId: this.versionId, key, now })) as RawStep);
  }

  stopChildren(key: string): Promise<{ id: string }[]> {
    return this.call({ op: 'stopChildren', versionId: this.versionId, key }) as Promise<{ id: string }[]>;
  }

  /** Drops the live actor (eviction, or rebuild after a failure); nothing to wait for. */
  stop(key: string): void {
    if (this.isHealthy) this.client.request({ op: 'stop', versionId: this.versionId, key }).catch(() => undefined);
  }

  noteActivity(seq: number): void {
    this.seq = Math.max(this.seq, seq);
    this.wake((waiter) => waiter.since < this.seq);
  }

  markUnhealthy(): void {
    this.isHealthy = false;
    this.wake(() => true);
  }

  private call(request: SandboxRequest): Promise<unknown> {
    if (!this.isHealthy) return Promise.reject(new SandboxDisposedError());
    return this.client.request(request);
  }

  private wake(due: (waiter: { since: number }) => boolean): void {
    const waking = this.waiters.filter(due);
    this.waiters = this.waiters.filter((waiter) => !due(waiter));
    for (const waiter of waking) waiter.resolve();
  }
}

/** Rebuilds a typed sandbox error from the worker, keeping its message. */
const rebuild = (error: SerializedError): Error => {
  let rebuilt: Error;
  switch (error.name) {
    case 'BundleValidationError':
      rebuilt = new BundleValidationError(error.message);
      break;
    case 'SandboxTimeoutError':
      rebuilt = new SandboxTimeoutError(error.limitMs ?? 0);
      break;
    case 'SandboxMemoryError':
      rebuilt = new SandboxMemoryError(error.limitMb ?? 0);
      break;
    case 'SandboxDisposedError':
      rebuilt = new SandboxDisposedError();
      break;
    case 'NoLiveActorError':
      rebuilt = new NoLiveActorError('');
      break;
    case 'StepTooLargeError':
      rebuilt = new StepTooLargeError(error.message);
      break;
    default:
      rebuilt = new MachineCodeError(error.message);
  }
  rebuilt.message = error.message;
  return rebuilt;
};
