/**
 * The life of the node's sandbox worker processes (sandbox-worker.ts): forks one when told to start or
 * on first use and, when it dies (machine code can crash V8 itself, e.g. one huge allocation), fails
 * what was in flight with SandboxCrashedError and starts a new one (at once, or on the next call).
 *
 * With a stall limit, each worker runs a watchdog (stall-watchdog.ts) that retires it when one call
 * into machine code holds it too long. The retired worker is left to finish that one call (the
 * culprit) and is killed after it answers or runs past its CPU limit by a second; the next worker is a
 * pre-forked standby, so that nobody waits for a process to boot. What becomes of the requests and
 * versions of a worker is the client's business (sandbox-client.ts, told through WorkerEvents).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { availableParallelism, setPriority } from 'node:os';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { MachineCodeError, SandboxStalledError } from '../errors.js';
import { InlineWorker } from './inline-worker.js';
import { type Batch, type NodeMessage, REPORT_FD, type WorkerMessage, workerArgs } from './protocol.js';
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

/** How the workers are started and watched (the SandboxClient's options of that kind). */
export interface WorkerLifecycleOptions {
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
  /**
   * Run machine code in the node's own process (`--sandbox inline`) instead of a forked worker: no
   * crossing between processes, but a V8 crash in machine code takes the node down, and there is no
   * stall watchdog (a call still ends at its CPU limit; one that took `stallMs` of CPU is reported to
   * onStall once it returned). For operators who trust the code they run.
   */
  inline?: boolean;
}

/** What the client is told of its workers. */
interface WorkerEvents {
  /** A message from `worker` (after which a retired worker that holds nothing more is dismissed). */
  received(worker: SandboxWorker, message: WorkerMessage): void;
  /** The current worker is no more (it died): what was queued for it and the versions loaded in it go too. */
  forgetWorkerState(): void;
  /**
   * The watchdog retired `worker` for the call of request `report.stalled`: everything else it held
   * moves on, and the worker's state is forgotten. Returns the version whose code held it, if known.
   */
  retired(worker: SandboxWorker, report: StallReport): string | undefined;
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

/** A request a worker was given and has not answered. */
export interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  versionId: string | undefined;
  /** The actor the request is for, if it is an actor's. */
  key: string | undefined;
  /** When it was made (performance.now()), when the client times its calls (SandboxClient's onAnswered). */
  sentAt: number;
}

/** Where a SandboxClient's requests run (a forked worker process, or the node itself), and what it has not answered. */
export interface SandboxWorker {
  readonly pending: Map<number, Pending>;
  readonly spawnedAt: number;
  retired: boolean;
  /** When a retired worker is killed whatever its culprit is doing. */
  deadline: NodeJS.Timeout | undefined;
  readonly alive: boolean;
  /** Hands over a batch of requests; `onError` when the channel to the worker failed (nothing of it ran). */
  send(batch: Batch<NodeMessage>, onError: (error: Error) => void): void;
  kill(): void;
  /** Ends the worker as a node ends it normally. */
  close(): Promise<void>;
}

/** One forked worker process and the requests it was given that it has not answered. */
export class WorkerProcess implements SandboxWorker {
  readonly pending = new Map<number, Pending>();
  readonly spawnedAt = Date.now();
  retired = false;
  /** When a retired worker is killed whatever its culprit is doing. */
  deadline: NodeJS.Timeout | undefined;

  constructor(readonly child: ChildProcess) {}

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  send(batch: Batch<NodeMessage>, onError: (error: Error) => void): void {
    this.child.send(batch, (error) => {
      if (error) onError(error);
    });
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

/** The workers of one SandboxClient: the current one, its standby, and retired ones finishing their culprit's call. */
export class WorkerLifecycle {
  /** The worker requests go to. */
  private current: SandboxWorker | undefined;
  /** Forked and idle, to replace `current` at once (only with a stall limit). */
  private standby: SandboxWorker | undefined;
  /** Retired workers still finishing their culprit's call. */
  private readonly retired = new Set<SandboxWorker>();
  private closed = false;
  /** The node is stopping: no worker is started any more. */
  private draining = false;
  /** Workers in a row that died young, for the restart delay. */
  private youngDeaths = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private standbyTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: WorkerLifecycleOptions,
    private readonly events: WorkerEvents,
  ) {}

  /** The worker requests go to, if one runs. */
  get worker(): SandboxWorker | undefined {
    return this.current;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** 0 inline: the watchdog is a thread of a worker process, and retiring one moves its requests to the next. */
  get stallMs(): number {
    return this.options.inline ? 0 : (this.options.stallMs ?? 0);
  }

  /** Makes sure a worker runs: the standby, if one is ready; else a new fork (see SandboxClient.start). */
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

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    clearTimeout(this.standbyTimer);
    const workers = [this.current, this.standby, ...this.retired].filter((w): w is SandboxWorker => w !== undefined);
    this.current = undefined;
    this.standby = undefined;
    this.retired.clear();
    await Promise.all(workers.map((worker) => worker.close()));
  }

  private spawn(): SandboxWorker {
    if (this.options.inline) {
      const worker: InlineWorker = new InlineWorker((batch) => this.receive(worker, batch), {
        stallMs: this.options.stallMs ?? 0,
        onStall: (stall) => this.options.onStall?.(stall),
      });
      return worker;
    }
    const stall = this.stallMs > 0;
    const child = fork(WORKER_SCRIPT, workerArgs({ role: this.options.role ?? 'main', stallMs: this.stallMs }), {
      execArgv: ['--no-node-snapshot', ...defaultWorkerNodeArgs(), ...(this.options.nodeArgs ?? [])],
      serialization: 'advanced',
      stdio: stall ? ['ignore', 'inherit', 'inherit', 'ipc', 'pipe'] : ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new WorkerProcess(child);
    if (this.options.niceness) deprioritize(child, this.options.niceness);
    child.on('message', (batch: Batch<WorkerMessage>) => this.receive(worker, batch));
    child.once('exit', (code, signal) => this.lost(worker, lossOf(code, signal)));
    // fork failing (EAGAIN, ENOMEM) or the channel breaking: the same as a crash, without 'exit'.
    child.on('error', (error) => this.lost(worker, { reason: error.message, outside: true }));
    if (stall) readLines(child.stdio[REPORT_FD] as Readable, (line) => this.stalled(worker, JSON.parse(line) as StallReport));
    return worker;
  }

  private receive(worker: SandboxWorker, batch: Batch<WorkerMessage>): void {
    for (const message of batch) {
      this.events.received(worker, message);
      if (message.kind === 'response' && worker.retired && worker.pending.size === 0) this.dismiss(worker);
    }
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
  private lost(worker: SandboxWorker, loss: Loss): void {
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
    this.events.forgetWorkerState();
    if (this.closed) return;
    this.options.onCrash?.(loss.reason);
    if (!this.options.restartAfterCrash || this.draining) return;
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => this.start(), this.restartDelay(worker));
    this.restartTimer.unref();
  }

  /** 0 after a worker that lived long enough; else a delay that doubles with each young death in a row. */
  private restartDelay(worker: SandboxWorker): number {
    this.youngDeaths = Date.now() - worker.spawnedAt < YOUNG_MS ? this.youngDeaths + 1 : 0;
    return this.youngDeaths === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 250 * 2 ** (this.youngDeaths - 1));
  }

  /**
   * The watchdog retired `worker` for the call of request `report.stalled`. The client moves
   * everything else it held to the next worker (WorkerEvents.retired); the culprit is left to finish
   * there, and the worker is killed after it answers or runs past its CPU limit by a second.
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
    const versionId = this.events.retired(worker, report);
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

  private dismiss(worker: SandboxWorker): void {
    this.retired.delete(worker);
    worker.kill();
  }
}

/** Fails every request a worker still holds. */
const failAll = (worker: SandboxWorker, error: () => Error): void => {
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
