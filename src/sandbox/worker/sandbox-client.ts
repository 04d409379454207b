/**
 * The node's side of the sandbox worker (sandbox-worker.ts): sends it requests in batches, matches its
 * answers to them and routes what else it reports (logs, host-call activity, unhealthy isolates, live
 * heaps) to the versions loaded in it (remote-version.ts). Starting, replacing and retiring the worker
 * process is worker-lifecycle.ts's: when a worker dies, what was in flight fails with
 * SandboxCrashedError; versions loaded in a dead worker report `healthy === false`, so their users
 * load them again and rebuild actors. When the stall watchdog retires a worker, every request it held
 * but the culprit's is failed with SandboxMovedError, which the runtime runs again at once in the next
 * worker.
 */
import { unavailable } from '../../domain/errors.js';
import type { BundleValidation } from '../bundle-validation.js';
import type { MigrationInput, MigrationOutput } from '../version-isolate.js';
import {
  BundleValidationError,
  MachineCodeError,
  NoLiveActorError,
  SandboxDisposedError,
  SandboxMemoryError,
  SandboxMovedError,
  SandboxTimeoutError,
  StepTooLargeError,
} from '../errors.js';
import type { CapturedLog } from '../types.js';
import {
  type Batch,
  type LoadSettings,
  MOVED_ERROR,
  type NodeMessage,
  type SandboxRequest,
  type SerializedError,
  type WorkerMessage,
  type WorkerStats,
} from './protocol.js';
import { RemoteVersion } from './remote-version.js';
import type { StallReport } from './stall-watchdog.js';
import { SandboxCrashedError, WorkerLifecycle, type SandboxWorker, type WorkerLifecycleOptions } from './worker-lifecycle.js';

interface SandboxClientOptions extends WorkerLifecycleOptions {
  onLog: (versionId: string, entry: CapturedLog) => void;
  /** Told what a version's live actors hold of its isolate, when over their budget and when back within (live-heap-watch.ts). */
  onLiveHeap?: (report: LiveHeapReport) => void;
  /** Told how long each answered request took, from the call to its answer, batching and the worker's queue included (GET /metrics). */
  onAnswered?: (seconds: number) => void;
}

/** Requests sent to the worker and unanswered from which a new batch waits for its answers (schedule). */
const HOLD_WHILE_AWAITING = 8;
/** How long a batch waits for the worker's answers at most (schedule). */
const HOLD_MS = 1;

/** What a version's live actors hold of its isolate's heap, against their budget (live-heap-watch.ts). */
export interface LiveHeapReport {
  version: RemoteVersion;
  heldBytes: number;
  budgetBytes: number;
}

export class SandboxClient {
  /** The worker process requests go to, its standby and retired ones. */
  private readonly workers: WorkerLifecycle;
  /** Where the logs of migrations running now go, by the tag their worker sends them under. */
  private readonly migrationLogs = new Map<string, (entry: CapturedLog) => void>();
  private migrations = 0;
  private nextId = 1;
  private readonly versions = new Map<string, RemoteVersion>();
  /** Each load's number, which the worker's stall reports name (the version whose code held it). */
  private readonly loadNumbers = new Map<number, string>();
  /**
   * Per worker, the request it answered last. The watchdog's report and the culprit's answer travel on
   * different channels, so on a busy node the answer can be read first; the culprit is then the last
   * request answered (a retired worker runs nothing after it), and is still told it was the culprit.
   */
  private readonly lastAnswered = new WeakMap<SandboxWorker, { id: number; key: string | undefined; versionId: string | undefined }>();
  private nextLoadNumber = 1;
  /** Requests made during this turn of the event loop, sent as one batch in its check phase. */
  private outgoing: NodeMessage[] = [];
  /** Of `outgoing`, the requests that wait for an answer (not the notifications). */
  private outgoingAnswered = 0;
  private flushScheduled = false;
  /** A flush held while the worker is busy (see schedule): it goes with the worker's next answers, or at this timer. */
  private heldFlush: NodeJS.Timeout | undefined;

  constructor(private readonly options: SandboxClientOptions) {
    this.workers = new WorkerLifecycle(options, {
      received: (worker, message) => this.received(worker, message),
      forgetWorkerState: () => this.forgetWorkerState(),
      retired: (worker, report) => this.moveAside(worker, report),
    });
  }

  /**
   * Makes sure a worker runs (the standby, if one is ready; else a new fork), so the first request does
   * not wait for it to boot (≈ 0.4 s here: a Node process, isolated-vm and the sandbox sources).
   */
  start(): void {
    this.workers.start();
  }

  /** The node is draining: from now on no worker is started or replaced (close ends those there are). */
  stopStarting(): void {
    this.workers.stopStarting();
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
    if (this.workers.isClosed || !this.workers.worker?.alive) return undefined;
    return (await this.request({ op: 'stats' })) as WorkerStats;
  }

  /**
   * A request nothing waits for (id 0, unanswered): one per evicted actor at scale, so it costs the
   * worker no answer and the node no promise. Sent to the worker there is; none is started for it.
   */
  notify(request: SandboxRequest): void {
    if (this.workers.isClosed || !this.workers.worker) return;
    this.outgoing.push({ id: 0, request });
    this.schedule();
  }

  request(request: SandboxRequest): Promise<unknown> {
    if (this.workers.isClosed) return Promise.reject(new SandboxDisposedError());
    this.start();
    const worker = this.workers.worker;
    if (!worker) return Promise.reject(unavailable('the node is stopping and starts no sandbox worker any more; retry after its restart'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      worker.pending.set(id, {
        resolve,
        reject,
        versionId: 'versionId' in request ? request.versionId : undefined,
        key: 'key' in request ? request.key : undefined,
        sentAt: this.options.onAnswered ? performance.now() : 0,
      });
      this.outgoing.push({ id, request });
      this.outgoingAnswered++;
      this.schedule();
    });
  }

  /**
   * Sends what this turn of the event loop asked in the check phase; but while the worker still has
   * HOLD_WHILE_AWAITING or more requests sent and unanswered, with the worker's next answers (it answers
   * at least every millisecond while it runs a batch) or HOLD_MS later: under load the requests then go in
   * fewer, larger messages, each of which costs both processes a serialization, a pipe write and a wake-up,
   * whatever it holds (bench/JOURNAL.md, 2026-11-29 11:40). With few in flight, at once, as before.
   */
  private schedule(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    const worker = this.workers.worker;
    const awaited = worker ? worker.pending.size - this.outgoingAnswered : 0;
    if (awaited >= HOLD_WHILE_AWAITING) this.heldFlush = setTimeout(this.flush, HOLD_MS);
    else setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    clearTimeout(this.heldFlush);
    this.heldFlush = undefined;
    const batch: Batch<NodeMessage> = this.outgoing;
    this.outgoing = [];
    this.outgoingAnswered = 0;
    const worker = this.workers.worker;
    if (batch.length === 0 || !worker) return;
    worker.send(batch, (error) => {
      for (const { id } of batch) {
        const waiting = worker.pending.get(id);
        if (waiting && worker.pending.delete(id)) waiting.reject(new SandboxCrashedError({ reason: error.message, outside: true }));
      }
    });
  };

  async close(): Promise<void> {
    await this.workers.close();
  }

  /** The current worker is no more: what was queued for it and the versions loaded in it go too. */
  private forgetWorkerState(): void {
    // Not yet sent, they were meant for the old worker's isolates; their promises were failed already.
    this.outgoing = [];
    this.outgoingAnswered = 0;
    for (const version of this.versions.values()) version.markUnhealthy();
    this.versions.clear();
    this.loadNumbers.clear();
  }

  /**
   * The watchdog retired `worker` for the call of request `report.stalled` (worker-lifecycle.ts).
   * Everything else it held is moved (failed with SandboxMovedError, so the runtime runs it again at
   * once, in the next worker); the culprit is left to finish there. Returns the culprit's version.
   */
  private moveAside(worker: SandboxWorker, report: StallReport): string | undefined {
    const waitingCulprit = worker.pending.get(report.stalled);
    const answered = this.lastAnswered.get(worker);
    const culprit = waitingCulprit ?? (answered?.id === report.stalled ? answered : undefined);
    // A request names its version; a delivery (a fetch's answer running machine code) only by number.
    const versionId = culprit?.versionId ?? this.loadNumbers.get(report.versionNo);
    const ownStall = { stallMs: this.workers.stallMs };
    for (const [id, waiting] of worker.pending) {
      if (id === report.stalled) continue;
      worker.pending.delete(id);
      // The culprit's actor's next call, sent after its answer: it cannot run where the actor lives.
      const own = culprit?.key !== undefined && waiting.key === culprit.key;
      waiting.reject(own ? new SandboxDisposedError(ownStall) : new SandboxMovedError());
    }
    // The culprit's actor finds its isolate gone on its next call: it is told that it was the culprit.
    const culpritVersion = culprit?.versionId === undefined ? undefined : this.versions.get(culprit.versionId);
    if (culprit?.key !== undefined) culpritVersion?.heldByOwnCall(culprit.key, ownStall);
    if (waitingCulprit) {
      // So is an asynchronous call (an http API's handler) that the retired worker moves on at its next
      // crossing: it cannot go on there, and it was not a bystander.
      const { reject } = waitingCulprit;
      waitingCulprit.reject = (error) => reject(error instanceof SandboxMovedError ? new SandboxDisposedError(ownStall) : error);
    }
    this.forgetWorkerState();
    return versionId;
  }

  private received(worker: SandboxWorker, message: WorkerMessage): void {
    switch (message.kind) {
      case 'response': {
        const waiting = worker.pending.get(message.id);
        if (waiting) {
          worker.pending.delete(message.id);
          // A retired worker answers what it did not run with a MOVED_ERROR: those ran no machine code.
          if (message.ok || message.error.name !== MOVED_ERROR)
            this.lastAnswered.set(worker, { id: message.id, key: waiting.key, versionId: waiting.versionId });
          this.options.onAnswered?.((performance.now() - waiting.sentAt) / 1000);
          if (message.ok) waiting.resolve(message.value);
          else waiting.reject(rebuild(message.error));
        }
        // The worker moved on: what was held for it goes in this turn's check phase (after the rest of
        // these answers, and the requests they lead to).
        if (this.heldFlush !== undefined) {
          clearTimeout(this.heldFlush);
          this.heldFlush = undefined;
          setImmediate(this.flush);
        }
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
        if (worker === this.workers.worker) this.versions.get(message.versionId)?.noteActivity(message.seq);
        return;
      case 'unhealthy':
        if (worker !== this.workers.worker) return;
        this.versions.get(message.versionId)?.markUnhealthy();
        this.versions.delete(message.versionId);
        return;
      case 'live-heap': {
        const version = worker === this.workers.worker ? this.versions.get(message.versionId) : undefined;
        if (version?.healthy) this.options.onLiveHeap?.({ version, heldBytes: message.heldBytes, budgetBytes: message.budgetBytes });
        return;
      }
    }
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
