/**
 * The node's side of the sandbox worker (sandbox-worker.ts): forks it when told to start or on first
 * use, matches answers to requests, and, when it dies (machine code can crash V8 itself, e.g. one huge
 * allocation), fails what was in flight with SandboxCrashedError and starts a new one (at once, or on
 * the next call). Versions loaded in a dead worker report `healthy === false`, so their users load
 * them again and rebuild actors.
 *
 * With a stall limit, each worker runs a watchdog (stall-watchdog.ts) that retires it when one call
 * into machine code holds it too long. The retired worker is left to finish that one call (the
 * culprit), and every other request it held is failed with SandboxMovedError, which the runtime runs
 * again at once in the next worker: a pre-forked standby, so that nobody waits for a process to boot.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { availableParallelism, setPriority } from 'node:os';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { unavailable } from '../../domain/errors.js';
import type { BundleValidation } from '../bundle-validation.js';
import type { MigrationInput, MigrationOutput } from '../version-isolate.js';
import {
  BundleValidationError,
  MachineCodeError,
  NoLiveActorError,
  type OwnStall,
  SandboxDisposedError,
  SandboxMemoryError,
  SandboxMovedError,
  SandboxStalledError,
  SandboxTimeoutError,
  StepTooLargeError,
} from '../errors.js';
import type {
  AuthorizingCaller,
  CapturedLog,
  HttpApiOutcome,
  HttpApiRequest,
  HttpApiSettled,
  PersistedSnapshot,
  ReadManyRequest,
  ReadRequest,
  Restore,
  StartInit,
  StartOptions,
  StepResult,
  WriteRequest,
} from '../types.js';
import { parseStep, type RawStep } from '../step-result.js';
import {
  type Batch,
  type LoadSettings,
  MOVED_ERROR,
  type NodeMessage,
  REPORT_FD,
  type SandboxRequest,
  type SerializedError,
  type WorkerMessage,
  type WorkerStats,
  workerArgs,
} from './protocol.js';
import type { StallReport } from './stall-watchdog.js';

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
export const defaultWorkerNodeArgs = (cores: number = availableParallelism()): string[] =>
  cores <= SMALL_HOST_CORES ? ['--single-threaded-gc'] : [];

/**
 * The signals V8 and machine code end a process with (abort on a fatal error or out of memory, a
 * crash, a trap). Any other signal (SIGKILL from the OOM killer or an operator, SIGTERM, SIGINT, ...)
 * came from outside and is no machine's fault.
 */
const MACHINE_CODE_SIGNALS: ReadonlySet<string> = new Set(['SIGABRT', 'SIGSEGV', 'SIGBUS', 'SIGILL', 'SIGTRAP', 'SIGFPE', 'SIGSYS']);

/** Why a worker went away: an exit code or a signal, or the channel to it failing. */
interface Loss {
  reason: string;
  /** Not something machine code can do: a signal from outside, a failed fork, a broken channel. */
  outside: boolean;
  /** The signal that ended the worker, if one did. */
  signal?: NodeJS.Signals;
}

const lossOf = (code: number | null, signal: NodeJS.Signals | null): Loss =>
  signal
    ? { reason: `killed by ${signal}`, outside: !MACHINE_CODE_SIGNALS.has(signal), signal }
    : { reason: `exit code ${code}`, outside: false };

/** The worker running a request died before answering: the request had no effect. */
export class SandboxCrashedError extends MachineCodeError {
  /** Killed from outside (see MACHINE_CODE_SIGNALS): retry it, and blame no version. */
  readonly killedFromOutside: boolean;

  constructor({ reason, outside, signal }: Loss) {
    super(
      outside
        ? `the sandbox worker was ${signal ? `killed (${signal})` : `lost (${reason})`} from outside the node while running this request; nothing was applied: retry`
        : `the machine's code crashed its sandbox worker (${reason}); nothing was applied`,
    );
    this.name = 'SandboxCrashedError';
    this.killedFromOutside = outside;
  }
}

/** A call that held its worker past the stall limit (the worker was retired for it). */
export interface Stall {
  /** The version whose machine code it ran (undefined for a request that names none). */
  versionId: string | undefined;
  heldMs: number;
  /** The CPU time the watchdog saw it take (undefined where it could only use the clock). */
  cpuMs: number | undefined;
}

interface SandboxClientOptions {
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
  /**
   * Retire a worker when one call into machine code holds it for this much CPU time (0 or absent:
   * never), and, unless `standby` is false, keep a standby worker forked so the next one is ready at once.
   */
  stallMs?: number;
  /** With a stall limit: keep a worker forked ahead to replace a retired one (default true). */
  standby?: boolean;
  /** The CPU limit of one call: a retired worker whose culprit runs this long and a second more is killed. */
  cpuLimitMs?: number;
  /** Told of each stall, after the worker was replaced (the node moves the culprit's version aside). */
  onStall?: (stall: Stall) => void;
  /**
   * The workers' CPU priority (a nice value, 0–19): the quarantine worker's code is known to misbehave,
   * and runs only on what the node and the main worker leave of the cores.
   */
  niceness?: number;
  /** Told what a version's live actors hold of its isolate, when over their budget and when back within (live-heap-watch.ts). */
  onLiveHeap?: (report: LiveHeapReport) => void;
}

/** What a version's live actors hold of its isolate's heap, against their budget (live-heap-watch.ts). */
export interface LiveHeapReport {
  version: RemoteVersion;
  heldBytes: number;
  budgetBytes: number;
}

/** A retired worker's nice value: the lowest. */
const RETIRED_NICENESS = 19;

/** Lowers a process's CPU priority; where the host does not allow it, the process keeps the node's. */
const deprioritize = (child: ChildProcess, niceness: number): void => {
  try {
    if (child.pid !== undefined) setPriority(child.pid, niceness);
  } catch {
    // not permitted here, or the process is gone
  }
};

/** A worker that dies sooner than this after it started counts as dying young (see restartAfterCrash). */
const YOUNG_MS = 10_000;
const MAX_RESTART_DELAY_MS = 30_000;
/** The standby is forked this long after the worker it stands by, so the two do not boot at once. */
const STANDBY_DELAY_MS = 1_000;
/** How much longer than its CPU limit a retired worker's culprit may run before the worker is killed. */
const RETIRED_GRACE_MS = 1_000;

type Event = { type: string; [key: string]: unknown };

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  versionId: string | undefined;
  /** The actor the request is for, if it is an actor's. */
  key: string | undefined;
}

/** One forked worker process and the requests it was given that it has not answered. */
class WorkerProcess {
  readonly pending = new Map<number, Pending>();
  readonly spawnedAt = Date.now();
  retired = false;
  /** When a retired worker is killed whatever its culprit is doing. */
  deadline: NodeJS.Timeout | undefined;

  constructor(readonly child: ChildProcess) {}

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  kill(): void {
    clearTimeout(this.deadline);
    if (this.alive) this.child.kill('SIGKILL');
  }

  /** Ends the worker as a node ends it normally (closing its channel), SIGKILL after 2 s. */
  async close(): Promise<void> {
    clearTimeout(this.deadline);
    if (!this.alive) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (this.child.connected) this.child.disconnect();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 2_000);
    await exited;
    clearTimeout(timer);
  }
}

export class SandboxClient {
  /** The worker requests go to. */
  private current: WorkerProcess | undefined;
  /** Forked and idle, to replace `current` at once (only with a stall limit). */
  private standby: WorkerProcess | undefined;
  /** Retired workers still finishing their culprit's call. */
  private readonly retired = new Set<WorkerProcess>();
  /** Where the logs of migrations running now go, by the tag their worker sends them under. */
  private readonly migrationLogs = new Map<string, (entry: CapturedLog) => void>();
  private migrations = 0;
  private nextId = 1;
  private readonly versions = new Map<string, RemoteVersion>();
  /** Each load's number, which the worker's stall reports name (the version whose code held it). */
  private readonly loadNumbers = new Map<number, string>();
  private nextLoadNumber = 1;
  private closed = false;
  /** The node is stopping: no worker is started any more. */
  private draining = false;
  /** Workers in a row that died young, for the restart delay. */
  private youngDeaths = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private standbyTimer: NodeJS.Timeout | undefined;
  /** Requests made during this turn of the event loop, sent as one batch in its check phase. */
  private outgoing: NodeMessage[] = [];
  private flushScheduled = false;

  constructor(private readonly options: SandboxClientOptions) {}

  private get stallMs(): number {
    return this.options.stallMs ?? 0;
  }

  /**
   * Makes sure a worker runs (the standby, if one is ready; else a new fork), so the first request does
   * not wait for it to boot (≈ 0.4 s here: a Node process, isolated-vm and the sandbox sources).
   */
  start(): void {
    if (this.closed || this.draining || this.current) return;
    clearTimeout(this.restartTimer);
    this.current = this.standby ?? this.spawn();
    this.standby = undefined;
    this.scheduleStandby(STANDBY_DELAY_MS);
  }

  /** The node is draining: from now on no worker is started or replaced (close ends those there are). */
  stopStarting(): void {
    this.draining = true;
    clearTimeout(this.restartTimer);
    clearTimeout(this.standbyTimer);
  }

  /** Loads a version into the worker; BundleValidationError and friends come back typed. */
  async load(versionId: string, code: string, settings: LoadSettings): Promise<RemoteVersion> {
    this.versions.get(versionId)?.markUnhealthy();
    const version = new RemoteVersion(versionId, this);
    this.versions.set(versionId, version);
    const versionNo = this.nextLoadNumber++;
    this.loadNumbers.set(versionNo, versionId);
    try {
      await this.request({ op: 'load', versionId, versionNo, code, settings });
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
    for (const [versionNo, loaded] of this.loadNumbers) if (loaded === versionId) this.loadNumbers.delete(versionNo);
    this.notify({ op: 'unload', versionId });
  }

  /** Checks a bundle in the worker; a bundle that crashes the worker is reported, not fatal. */
  async validate(code: string, settings: LoadSettings): Promise<BundleValidation> {
    try {
      return (await this.request({ op: 'validate', code, settings })) as BundleValidation;
    } catch (error) {
      if (error instanceof SandboxCrashedError)
        return { ok: false, error: `the bundle's top-level code crashed the sandbox (${error.message})` };
      throw error;
    }
  }

  /** Checks a migration bundle in the worker, as `validate` does a version's. */
  async validateMigration(code: string, settings: LoadSettings): Promise<{ ok: true } | { ok: false; error: string }> {
    try {
      return (await this.request({ op: 'validateMigration', code, settings })) as { ok: true } | { ok: false; error: string };
    } catch (error) {
      if (error instanceof SandboxCrashedError)
        return { ok: false, error: `the bundle's top-level code crashed the sandbox (${error.message})` };
      throw error;
    }
  }

  /**
   * Runs one migration of an upgrade in the worker (a throw-away isolate); machine code errors come
   * back typed. What its code logs goes to `onLog`, all of it before this settles, whether it worked.
   */
  async migrate(
    code: string,
    input: MigrationInput,
    settings: LoadSettings,
    onLog?: (entry: CapturedLog) => void,
  ): Promise<MigrationOutput> {
    if (!onLog) return (await this.request({ op: 'migrate', code, input, settings })) as MigrationOutput;
    const logTag = `migration:${++this.migrations}`;
    this.migrationLogs.set(logTag, onLog);
    try {
      return (await this.request({ op: 'migrate', code, input, settings, logTag })) as MigrationOutput;
    } finally {
      this.migrationLogs.delete(logTag);
    }
  }

  /** What the worker holds now; undefined when none runs (none is started for it). */
  async stats(): Promise<WorkerStats | undefined> {
    if (this.closed || !this.current?.alive) return undefined;
    return (await this.request({ op: 'stats' })) as WorkerStats;
  }

  /**
   * A request nothing waits for (id 0, unanswered): one per evicted actor at scale, so it costs the
   * worker no answer and the node no promise. Sent to the worker there is; none is started for it.
   */
  notify(request: SandboxRequest): void {
    if (this.closed || !this.current) return;
    this.outgoing.push({ id: 0, request });
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flush);
    }
  }

  request(request: SandboxRequest): Promise<unknown> {
    if (this.closed) return Promise.reject(new SandboxDisposedError());
    this.start();
    const worker = this.current;
    if (!worker) return Promise.reject(unavailable('the node is stopping and starts no sandbox worker any more; retry after its restart'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      worker.pending.set(id, {
        resolve,
        reject,
        versionId: 'versionId' in request ? request.versionId : undefined,
        key: 'key' in request ? request.key : undefined,
      });
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
    const worker = this.current;
    if (batch.length === 0 || !worker) return;
    worker.child.send(batch, (error) => {
      if (!error) return;
      for (const { id } of batch) {
        const waiting = worker.pending.get(id);
        if (waiting && worker.pending.delete(id)) waiting.reject(new SandboxCrashedError({ reason: error.message, outside: true }));
      }
    });
  };

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    clearTimeout(this.standbyTimer);
    const workers = [this.current, this.standby, ...this.retired].filter((w): w is WorkerProcess => w !== undefined);
    this.current = undefined;
    this.standby = undefined;
    this.retired.clear();
    await Promise.all(workers.map((worker) => worker.close()));
  }

  private spawn(): WorkerProcess {
    const stall = this.stallMs > 0;
    const child = fork(WORKER_SCRIPT, workerArgs({ role: this.options.role ?? 'main', stallMs: this.stallMs }), {
      execArgv: ['--no-node-snapshot', ...defaultWorkerNodeArgs(), ...(this.options.nodeArgs ?? [])],
      serialization: 'advanced',
      stdio: stall ? ['ignore', 'inherit', 'inherit', 'ipc', 'pipe'] : ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new WorkerProcess(child);
    if (this.options.niceness) deprioritize(child, this.options.niceness);
    child.on('message', (batch: Batch<WorkerMessage>) => {
      for (const message of batch) this.received(worker, message);
    });
    child.once('exit', (code, signal) => this.lost(worker, lossOf(code, signal)));
    // fork failing (EAGAIN, ENOMEM) or the channel breaking: the same as a crash, without 'exit'.
    child.on('error', (error) => this.lost(worker, { reason: error.message, outside: true }));
    if (stall) readLines(child.stdio[REPORT_FD] as Readable, (line) => this.stalled(worker, JSON.parse(line) as StallReport));
    return worker;
  }

  private scheduleStandby(delayMs: number): void {
    if (this.stallMs <= 0 || this.options.standby === false || this.standby || this.closed || this.draining) return;
    clearTimeout(this.standbyTimer);
    this.standbyTimer = setTimeout(() => {
      if (!this.standby && !this.closed && !this.draining) this.standby = this.spawn();
    }, delayMs);
    this.standbyTimer.unref();
  }

  /** A worker is gone (see `lossOf`). */
  private lost(worker: WorkerProcess, loss: Loss): void {
    worker.kill();
    if (worker === this.standby) {
      this.standby = undefined;
      this.scheduleStandby(Math.max(STANDBY_DELAY_MS, this.restartDelay(worker)));
      return;
    }
    if (this.retired.delete(worker)) {
      // Only the culprit is left in a retired worker: it crashed the worker (thrashing at its memory limit ends so).
      failAll(
        worker,
        () =>
          new MachineCodeError(
            `the machine's code held its sandbox worker past the stall limit and then crashed it (${loss.reason}); nothing was applied`,
          ),
      );
      return;
    }
    if (worker !== this.current) return;
    this.current = undefined;
    failAll(worker, () => new SandboxCrashedError(loss));
    this.forgetWorkerState();
    if (this.closed) return;
    this.options.onCrash?.(loss.reason);
    if (!this.options.restartAfterCrash || this.draining) return;
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => this.start(), this.restartDelay(worker));
    this.restartTimer.unref();
  }

  /** 0 after a worker that lived long enough; else a delay that doubles with each young death in a row. */
  private restartDelay(worker: WorkerProcess): number {
    this.youngDeaths = Date.now() - worker.spawnedAt < YOUNG_MS ? this.youngDeaths + 1 : 0;
    return this.youngDeaths === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 250 * 2 ** (this.youngDeaths - 1));
  }

  /** The current worker is no more: what was queued for it and the versions loaded in it go too. */
  private forgetWorkerState(): void {
    // Not yet sent, they were meant for the old worker's isolates; their promises were failed already.
    this.outgoing = [];
    for (const version of this.versions.values()) version.markUnhealthy();
    this.versions.clear();
    this.loadNumbers.clear();
  }

  /**
   * The watchdog retired `worker` for the call of request `report.stalled`. Everything else it held is
   * moved (failed with SandboxMovedError, so the runtime runs it again at once, in the next worker);
   * the culprit is left to finish there, and the worker is killed after it answers or runs past its
   * CPU limit by a second.
   */
  private stalled(worker: WorkerProcess, report: StallReport): void {
    if (worker !== this.current || worker.retired) return;
    worker.retired = true;
    this.current = undefined;
    this.retired.add(worker);
    // Only the culprit is left in it, and it would take a core from the worker that replaces it while
    // that loads versions again. Its limits are measured by the clock, so this does not extend them.
    deprioritize(worker.child, RETIRED_NICENESS);
    const culprit = worker.pending.get(report.stalled);
    // A request names its version; a delivery (a fetch's answer running machine code) only by number.
    const versionId = culprit?.versionId ?? this.loadNumbers.get(report.versionNo);
    for (const [id, waiting] of worker.pending) {
      if (id === report.stalled) continue;
      worker.pending.delete(id);
      waiting.reject(new SandboxMovedError());
    }
    // The culprit's actor finds its isolate gone on its next call: it is told that it was the culprit.
    const ownStall = { stallMs: this.stallMs };
    const culpritVersion = culprit?.versionId === undefined ? undefined : this.versions.get(culprit.versionId);
    if (culprit?.key !== undefined) culpritVersion?.heldByOwnCall(culprit.key, ownStall);
    if (culprit) {
      // So is an asynchronous call (an http API's handler) that the retired worker moves on at its next
      // crossing: it cannot go on there, and it was not a bystander.
      const { reject } = culprit;
      culprit.reject = (error) => reject(error instanceof SandboxMovedError ? new SandboxDisposedError(ownStall) : error);
    }
    this.forgetWorkerState();
    this.start();
    this.options.onStall?.({ versionId, heldMs: Date.now() - report.startedAt, cpuMs: report.cpuMs });
    if (!culprit) {
      // A delivery, or a request that answered while the report was on its way: no request waits for
      // the worker any more (a delivery's answer is lost with it, as in a crash).
      this.dismiss(worker);
      return;
    }
    const limitMs = this.options.cpuLimitMs ?? 0;
    worker.deadline = setTimeout(
      () => {
        if (worker.pending.delete(report.stalled))
          culprit.reject(new SandboxStalledError(limitMs, Math.round(Date.now() - report.startedAt)));
        this.dismiss(worker);
      },
      Math.max(0, report.startedAt + limitMs + RETIRED_GRACE_MS - Date.now()),
    );
    worker.deadline.unref();
  }

  private dismiss(worker: WorkerProcess): void {
    this.retired.delete(worker);
    worker.kill();
  }

  private received(worker: WorkerProcess, message: WorkerMessage): void {
    switch (message.kind) {
      case 'response': {
        const waiting = worker.pending.get(message.id);
        if (waiting) {
          worker.pending.delete(message.id);
          if (message.ok) waiting.resolve(message.value);
          else waiting.reject(rebuild(message.error));
        }
        if (worker.retired && worker.pending.size === 0) this.dismiss(worker);
        return;
      }
      case 'log': {
        const migrationLog = this.migrationLogs.get(message.versionId);
        if (migrationLog) migrationLog(message.entry);
        else this.options.onLog(message.versionId, message.entry);
        return;
      }
      // About versions loaded in this worker: a retired worker's versions are not the current ones.
      case 'activity':
        if (worker === this.current) this.versions.get(message.versionId)?.noteActivity(message.seq);
        return;
      case 'unhealthy':
        if (worker !== this.current) return;
        this.versions.get(message.versionId)?.markUnhealthy();
        this.versions.delete(message.versionId);
        return;
      case 'live-heap': {
        const version = worker === this.current ? this.versions.get(message.versionId) : undefined;
        if (version?.healthy) this.options.onLiveHeap?.({ version, heldBytes: message.heldBytes, budgetBytes: message.budgetBytes });
        return;
      }
    }
  }
}

/** Fails every request a worker still holds. */
const failAll = (worker: WorkerProcess, error: () => Error): void => {
  for (const { reject } of worker.pending.values()) reject(error());
  worker.pending.clear();
};

/** Calls `onLine` with each newline-terminated line of a stream. */
const readLines = (stream: Readable, onLine: (line: string) => void): void => {
  let buffered = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      try {
        onLine(line);
      } catch {
        // not a report: ignore
      }
    }
  });
  stream.on('error', () => undefined);
};

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

  /** The paths a v5 instance's history states remember (see VersionIsolate.rememberedPaths5). */
  rememberedPaths5(snapshot: PersistedSnapshot): Promise<string[][]> {
    return this.call({ op: 'rememberedPaths5', versionId: this.versionId, snapshot }) as Promise<string[][]>;
  }

  allowRead(request: ReadRequest): Promise<boolean> {
    return this.call({ op: 'allowRead', versionId: this.versionId, request }) as Promise<boolean>;
  }

  /** allowRead of one state for several auth contexts, in one round trip. */
  allowReads(request: ReadManyRequest): Promise<boolean[]> {
    return this.call({ op: 'allowReads', versionId: this.versionId, request }) as Promise<boolean[]>;
  }

  allowWrite(request: WriteRequest): Promise<boolean> {
    return this.call({ op: 'allowWrite', versionId: this.versionId, request }) as Promise<boolean>;
  }

  async start(key: string, init: StartInit, options: StartOptions): Promise<StepResult> {
    return parseStep((await this.call({ op: 'start', versionId: this.versionId, key, init, options })) as RawStep);
  }

  /** allowWrite for a new instance and, when it allows, its start, in one round trip; 'rejected' starts nothing. */
  async startAuthorized(key: string, init: StartInit, options: StartOptions, request: WriteRequest): Promise<StepResult | 'rejected'> {
    const raw = (await this.call({ op: 'startAuthorized', versionId: this.versionId, key, init, options, request })) as
      RawStep | 'rejected';
    return raw === 'rejected' ? raw : parseStep(raw);
  }

  /** `restore`: the actor is not live here (evicted, or a new worker); restored in the same round trip. */
  async send(key: string, event: Event, now: number, restore?: Restore): Promise<StepResult> {
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
    caller: AuthorizingCaller,
    event: Event,
    now: number,
    restore?: Restore,
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

  async advance(key: string, now: number, restore?: Restore): Promise<StepResult> {
    return parseStep((await this.call({ op: 'advance', versionId: this.versionId, key, now, ...(restore ? { restore } : {}) })) as RawStep);
  }

  /** httpApiMapper[slug].handler(request) (wire-protocol §3.14); see VersionIsolate.httpApiHandler. */
  httpApiHandler(slug: string, request: HttpApiRequest, deadlineMs: number): Promise<HttpApiOutcome> {
    return this.call({ op: 'httpApiHandler', versionId: this.versionId, slug, request, deadlineMs }) as Promise<HttpApiOutcome>;
  }

  /** httpApiMapper[slug].responseMapper for the settled instance; see VersionIsolate.httpApiResponse. */
  httpApiResponse(slug: string, settled: HttpApiSettled, deadlineMs: number): Promise<HttpApiOutcome> {
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
    case MOVED_ERROR:
      rebuilt = new SandboxMovedError();
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
