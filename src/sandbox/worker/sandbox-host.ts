/**
 * What runs the requests of a SandboxClient: the isolates of the machine versions loaded for it, and
 * the calls into them. It lives in the sandbox worker process (sandbox-worker.ts; the default, where a
 * V8 crash in machine code costs a worker restart, not the node) or, with `--sandbox inline`, in the
 * node's own process (inline-worker.ts). Either way it takes the node's messages one at a time and
 * says what it has to say through `post`, in order; its owner sends those on in batches.
 */
import { runMigration, validateBundle, validateMigrationBundle } from '../bundle-validation.js';
import { SandboxDisposedError, SandboxMovedError } from '../errors.js';
import type { CapturedLog } from '../types.js';
import { VersionIsolate } from '../version-isolate.js';
import { type CallSlot, DELIVERY } from './call-slot.js';
import { LiveHeapWatch } from './live-heap-watch.js';
import {
  MOVED_ERROR,
  type NodeMessage,
  type SandboxRequest,
  type SerializedError,
  type WorkerMessage,
  type WorkerStats,
} from './protocol.js';

/**
 * The calls into machine code the stall watchdog times: each runs synchronously on this thread, so a
 * long one holds up every request queued behind it. Loading and validating are not among them: their
 * evaluation is asynchronous, and a large bundle is not misbehaviour.
 */
const TIMED_OPS = new Set<SandboxRequest['op']>([
  'rememberedPaths5',
  'definition',
  'allowRead',
  'allowReads',
  'allowWrite',
  'start',
  'startAuthorized',
  'send',
  'sendAuthorized',
  'advance',
  'stopChildren',
]);

/** The calls that may leave a live actor holding more of its isolate's heap. */
const STEP_OPS = new Set<SandboxRequest['op']>(['start', 'startAuthorized', 'send', 'sendAuthorized', 'advance']);

export interface SandboxHostOptions {
  /** Where what the host has to say goes (answers, logs, host-call activity, unhealthy isolates, live heaps). */
  post: (message: WorkerMessage) => void;
  /** Shared with a stall watchdog (call-slot.ts), when there is one: each call into machine code is marked in it. */
  slot?: CallSlot;
  /**
   * Without a watchdog (inline: no thread can interrupt the thread that runs machine code and move the
   * other requests on), each call into machine code is timed here instead: one that took `stallMs` of
   * the isolate's CPU time is reported once it returned, so that its org can be moved aside.
   */
  slowCalls?: { stallMs: number; onSlow: (slow: SlowCall) => void };
  /** The host runs in the node's own process (inline): its stats say so, as their RSS is the node's. */
  inNodeProcess?: boolean;
}

/** A call into machine code that held the thread it ran on (see SandboxHostOptions.slowCalls). */
export interface SlowCall {
  versionId: string;
  heldMs: number;
  cpuMs: number;
}

export class SandboxHost {
  private readonly isolates = new Map<string, VersionIsolate>();
  /** The node's number of each loaded version (its load request's), for stall reports. */
  private readonly versionNumbers = new Map<string, number>();
  /** Per loaded isolate with a live-actor budget: how much its live actors hold (live-heap-watch.ts). */
  private readonly heapWatches = new WeakMap<VersionIsolate, LiveHeapWatch>();
  /** Unloads seen per version, so a load still evaluating when its version is unloaded does not keep it. */
  private readonly unloads = new Map<string, number>();
  private readonly post: (message: WorkerMessage) => void;
  private readonly slot: CallSlot | undefined;
  private readonly slowCalls: SandboxHostOptions['slowCalls'];
  private readonly inNodeProcess: boolean;

  constructor(options: SandboxHostOptions) {
    this.inNodeProcess = options.inNodeProcess === true;
    this.post = options.post;
    this.slot = options.slot;
    this.slowCalls = options.slowCalls;
  }

  /** Runs one message of the node's; what it answers (now, or later for an asynchronous call) goes to `post`. */
  run({ id, request }: NodeMessage): void {
    // Retired by the watchdog: the node has moved this request to another worker already (or does so on
    // this answer); running it here too would run its machine code twice.
    if (this.slot?.retired) {
      if (id !== 0) this.post({ kind: 'response', id, ok: false, error: { name: MOVED_ERROR, message: 'the sandbox worker was retired' } });
      return;
    }
    let value: unknown;
    try {
      value =
        (this.slot || this.slowCalls) && TIMED_OPS.has(request.op) && 'versionId' in request
          ? this.timed(id, request.versionId, () => this.handle(request, id))
          : this.handle(request, id);
    } catch (error) {
      this.failed(id, request, error);
      return;
    }
    if (value instanceof Promise) {
      value.then(
        (settled: unknown) => id !== 0 && this.post({ kind: 'response', id, ok: true, value: settled }),
        (error: unknown) => this.failed(id, request, error),
      );
    } else {
      if (id !== 0) this.post({ kind: 'response', id, ok: true, value });
      if (STEP_OPS.has(request.op) && 'versionId' in request) this.watchHeap(request.versionId);
    }
  }

  /** Frees every isolate (the inline host's node is closing). */
  disposeAll(): void {
    for (const isolate of this.isolates.values()) isolate.dispose();
    this.isolates.clear();
    this.versionNumbers.clear();
  }

  /** Runs a call into machine code on behalf of request `id` (or DELIVERY), timed by the watchdog. */
  private timed<T>(id: number, versionId: string, run: () => T): T {
    const slot = this.slot;
    if (!slot) return this.slowCalls ? this.timedHere(versionId, run, this.slowCalls) : run();
    slot.begin(id, this.versionNumbers.get(versionId) ?? 0);
    try {
      return run();
    } finally {
      slot.end();
    }
  }

  /** A call timed by the thread that makes it (no watchdog): by the clock first, then by its isolate's CPU time. */
  private timedHere<T>(versionId: string, run: () => T, { stallMs, onSlow }: { stallMs: number; onSlow: (slow: SlowCall) => void }): T {
    const isolate = this.isolates.get(versionId);
    const startedAt = performance.now();
    const cpuBefore = isolate?.cpuTimeNs();
    try {
      return run();
    } finally {
      const heldMs = performance.now() - startedAt;
      // (CPU time, not the clock: on a busy host a call can wait for a core far longer than it runs)
      const cpuAfter = heldMs >= stallMs ? isolate?.cpuTimeNs() : undefined;
      if (cpuBefore !== undefined && cpuAfter !== undefined) {
        const cpuMs = Number(cpuAfter - cpuBefore) / 1e6;
        if (cpuMs >= stallMs) onSlow({ versionId, heldMs: Math.round(heldMs), cpuMs: Math.round(cpuMs) });
      }
    }
  }

  /** Forwards host-call completions of a version to the node, for its settle loops. */
  private watchActivity(versionId: string, isolate: VersionIsolate): void {
    const seq = isolate.activitySeq;
    void isolate.nextActivity(seq).then(() => {
      if (this.isolates.get(versionId) !== isolate) return;
      if (!isolate.healthy) {
        this.isolates.delete(versionId);
        this.post({ kind: 'unhealthy', versionId });
        return;
      }
      this.post({ kind: 'activity', versionId, seq: isolate.activitySeq });
      this.watchActivity(versionId, isolate);
    });
  }

  private isolateOf(versionId: string): VersionIsolate {
    const isolate = this.isolates.get(versionId);
    if (!isolate || !isolate.healthy) {
      this.isolates.delete(versionId);
      throw new SandboxDisposedError();
    }
    return isolate;
  }

  /** After a step: tells the node when the version's live actors hold more than their budget. */
  private watchHeap(versionId: string): void {
    const isolate = this.isolates.get(versionId);
    const watch = isolate && this.heapWatches.get(isolate);
    const heldBytes = watch?.afterStep();
    if (watch && heldBytes !== undefined) this.post({ kind: 'live-heap', versionId, heldBytes, budgetBytes: watch.budgetBytes });
  }

  /**
   * How the crossings of an asynchronous call of request `id` run: timed by the watchdog like a
   * request's call; none once the worker is retired (the node has moved the request on by then).
   */
  private crossings(id: number, versionId: string) {
    return <T>(crossing: () => T): T => {
      if (this.slot?.retired) throw new SandboxMovedError();
      return this.timed(id, versionId, crossing);
    };
  }

  /**
   * Runs one request (`id` is its number); loading and validating a bundle (module evaluation) and
   * http API calls (machine code that may wait) are asynchronous.
   */
  private handle(request: SandboxRequest, id: number): unknown {
    switch (request.op) {
      case 'load':
        return this.load(request, id);
      case 'validate':
        return validateBundle(request.code, { memoryLimitMb: request.settings.memoryLimitMb, cpuLimitMs: request.settings.cpuLimitMs });
      case 'validateMigration':
        return validateMigrationBundle(request.code, {
          memoryLimitMb: request.settings.memoryLimitMb,
          cpuLimitMs: request.settings.cpuLimitMs,
        });
      case 'migrate':
        return runMigration(request.code, request.input, {
          memoryLimitMb: request.settings.memoryLimitMb,
          cpuLimitMs: request.settings.cpuLimitMs,
          // (sent before the answer, on the same channel: the node has them all when the migration returns or fails)
          ...(request.logTag === undefined
            ? {}
            : { onLog: (entry: CapturedLog) => this.post({ kind: 'log', versionId: request.logTag as string, entry }) }),
        });
      case 'rememberedPaths5':
        return this.isolateOf(request.versionId).rememberedPaths5(request.snapshot);
      case 'definition':
        return this.isolateOf(request.versionId).definition();
      case 'allowRead':
        return this.isolateOf(request.versionId).allowRead(request.request);
      case 'allowReads':
        return this.isolateOf(request.versionId).allowReads(request.request);
      case 'allowWrite':
        return this.isolateOf(request.versionId).allowWrite(request.request);
      // Step results go back as the harness's JSON texts: parsed once, on the node's side.
      case 'start':
        return this.isolateOf(request.versionId).startRaw(request.key, request.init, request.options);
      case 'startAuthorized':
        return this.isolateOf(request.versionId).startAuthorizedRaw(request.key, request.init, request.request, request.options);
      case 'send':
        return this.isolateOf(request.versionId).sendRaw(request.key, request.event, request.now, request.restore);
      case 'sendAuthorized':
        return this.isolateOf(request.versionId).sendAuthorizedRaw(
          request.key,
          request.caller,
          request.event,
          request.now,
          request.restore,
        );
      case 'advance':
        return this.isolateOf(request.versionId).advanceRaw(request.key, request.now, request.restore);
      case 'stopChildren':
        return this.isolateOf(request.versionId).stopChildren(request.key);
      // Asynchronous when the machine code is (it may wait for its fetches and timers): each of its
      // crossings into the isolate is timed on its own (not in TIMED_OPS).
      case 'httpApiHandler':
        return this.isolateOf(request.versionId).httpApiHandler(
          request.slug,
          request.request,
          request.deadlineMs,
          this.crossings(id, request.versionId),
        );
      case 'httpApiResponse':
        return this.isolateOf(request.versionId).httpApiResponse(
          request.slug,
          request.settled,
          request.deadlineMs,
          this.crossings(id, request.versionId),
        );
      case 'stop':
        this.isolates.get(request.versionId)?.stop(request.key);
        return true;
      case 'stats':
        return this.stats();
      case 'unload':
        this.unloads.set(request.versionId, (this.unloads.get(request.versionId) ?? 0) + 1);
        this.isolates.get(request.versionId)?.dispose();
        this.isolates.delete(request.versionId);
        this.versionNumbers.delete(request.versionId);
        return true;
    }
  }

  private stats(): WorkerStats {
    return {
      rssBytes: process.memoryUsage.rss(),
      ...(this.inNodeProcess ? { inNodeProcess: true as const } : {}),
      isolates: [...this.isolates]
        .filter(([, isolate]) => isolate.healthy)
        .map(([versionId, isolate]) => ({ versionId, heapUsedBytes: isolate.heapUsedBytes(), ...isolate.census() })),
    };
  }

  private async load(request: Extract<SandboxRequest, { op: 'load' }>, id: number): Promise<true> {
    this.isolates.get(request.versionId)?.dispose();
    const unloadsBefore = this.unloads.get(request.versionId) ?? 0;
    // (so that a stall of the load's own calls into the bundle names the version)
    this.versionNumbers.set(request.versionId, request.versionNo);
    const isolate = await VersionIsolate.load({
      versionId: request.versionId,
      code: request.code,
      ...request.settings,
      onLog: (entry) => this.post({ kind: 'log', versionId: request.versionId, entry }),
      aroundDelivery: (deliver) => this.timed(DELIVERY, request.versionId, deliver),
      aroundMachineCode: (run) => this.timed(id, request.versionId, run),
    });
    if ((this.unloads.get(request.versionId) ?? 0) !== unloadsBefore) {
      isolate.dispose();
      throw new SandboxDisposedError();
    }
    this.isolates.set(request.versionId, isolate);
    this.watchActivity(request.versionId, isolate);
    const { liveActorMemoryMb } = request.settings;
    if (liveActorMemoryMb > 0)
      this.heapWatches.set(isolate, new LiveHeapWatch(liveActorMemoryMb * 1024 * 1024, () => isolate.heapUsedBytes()));
    return true;
  }

  private failed(id: number, request: SandboxRequest, error: unknown): void {
    // A memory error disposed the isolate: say so, so the node reloads the version.
    if ('versionId' in request && this.isolates.get(request.versionId)?.healthy === false) {
      this.isolates.delete(request.versionId);
      this.post({ kind: 'unhealthy', versionId: request.versionId });
    }
    if (id !== 0) this.post({ kind: 'response', id, ok: false, error: serialize(error) });
  }
}

const serialize = (error: unknown): SerializedError => {
  if (!(error instanceof Error)) return { name: 'MachineCodeError', message: String(error) };
  const out: SerializedError = { name: error.name, message: error.message };
  const extra = error as { limitMs?: unknown; limitMb?: unknown };
  if (typeof extra.limitMs === 'number') out.limitMs = extra.limitMs;
  if (typeof extra.limitMb === 'number') out.limitMb = extra.limitMb;
  return out;
};
