/**
 * The sandbox worker process: hosts the isolates of machine versions for its node. The node forks it
 * (sandbox-client.ts) and talks to it over IPC; if machine code crashes V8 here, only this process
 * dies and the node starts another. Calls into isolates are synchronous: besides them this process
 * only performs the fetches machine code makes.
 */
import { Worker } from 'node:worker_threads';
import { runMigration, validateBundle, validateMigrationBundle } from '../bundle-validation.js';
import { SandboxDisposedError, SandboxMovedError } from '../errors.js';
import type { CapturedLog } from '../types.js';
import { VersionIsolate } from '../version-isolate.js';
import { CallSlot, DELIVERY } from './call-slot.js';
import { LiveHeapWatch } from './live-heap-watch.js';
import {
  type Batch,
  MOVED_ERROR,
  type NodeMessage,
  parseWorkerArgs,
  REPORT_FD,
  type SandboxRequest,
  type SerializedError,
  type WorkerMessage,
  type WorkerStats,
} from './protocol.js';
import type { WatchdogData } from './stall-watchdog.js';

const { stallMs } = parseWorkerArgs(process.argv.slice(2));

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

/** Shared with the watchdog thread (call-slot.ts), when the node asked for one. */
const slot = stallMs > 0 ? new CallSlot() : undefined;
if (slot) {
  const data: WatchdogData = { buffer: slot.buffer, stallMs, reportFd: REPORT_FD };
  new Worker(new URL('./stall-watchdog.js', import.meta.url), { workerData: data }).unref();
}

const isolates = new Map<string, VersionIsolate>();
/** The node's number of each loaded version (its load request's), for stall reports. */
const versionNumbers = new Map<string, number>();

/** Runs a call into machine code on behalf of request `id` (or DELIVERY), timed by the watchdog. */
const timed = <T>(id: number, versionId: string, run: () => T): T => {
  if (!slot) return run();
  slot.begin(id, versionNumbers.get(versionId) ?? 0);
  try {
    return run();
  } finally {
    slot.end();
  }
};
/** Per loaded isolate with a live-actor budget: how much its live actors hold (live-heap-watch.ts). */
const heapWatches = new WeakMap<VersionIsolate, LiveHeapWatch>();
/** The calls that may leave a live actor holding more of its isolate's heap. */
const STEP_OPS = new Set<SandboxRequest['op']>(['start', 'startAuthorized', 'send', 'sendAuthorized', 'advance']);
/** Unloads seen per version, so a load still evaluating when its version is unloaded does not keep it. */
const unloads = new Map<string, number>();

/** Messages for the node, sent together once the current batch (or callback) is done. */
let outgoing: WorkerMessage[] = [];
let flushScheduled = false;

const flush = (): void => {
  flushScheduled = false;
  if (outgoing.length === 0) return;
  const batch: Batch<WorkerMessage> = outgoing;
  outgoing = [];
  process.send?.(batch);
};

const post = (message: WorkerMessage): void => {
  outgoing.push(message);
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flush);
  }
};

/** Forwards host-call completions of a version to the node, for its settle loops. */
const watchActivity = (versionId: string, isolate: VersionIsolate): void => {
  const seq = isolate.activitySeq;
  void isolate.nextActivity(seq).then(() => {
    if (isolates.get(versionId) !== isolate) return;
    if (!isolate.healthy) {
      isolates.delete(versionId);
      post({ kind: 'unhealthy', versionId });
      return;
    }
    post({ kind: 'activity', versionId, seq: isolate.activitySeq });
    watchActivity(versionId, isolate);
  });
};

const isolateOf = (versionId: string): VersionIsolate => {
  const isolate = isolates.get(versionId);
  if (!isolate || !isolate.healthy) {
    isolates.delete(versionId);
    throw new SandboxDisposedError();
  }
  return isolate;
};

/** After a step: tells the node when the version's live actors hold more than their budget. */
const watchHeap = (versionId: string): void => {
  const isolate = isolates.get(versionId);
  const watch = isolate && heapWatches.get(isolate);
  const heldBytes = watch?.afterStep();
  if (watch && heldBytes !== undefined) post({ kind: 'live-heap', versionId, heldBytes, budgetBytes: watch.budgetBytes });
};

/**
 * How the crossings of an asynchronous call of request `id` run: timed by the watchdog like a
 * request's call; none once the worker is retired (the node has moved the request on by then).
 */
const crossings =
  (id: number, versionId: string) =>
  <T>(crossing: () => T): T => {
    if (slot?.retired) throw new SandboxMovedError();
    return timed(id, versionId, crossing);
  };

/**
 * Runs one request (`id` is its number); loading and validating a bundle (module evaluation) and
 * http API calls (machine code that may wait) are asynchronous.
 */
const handle = (request: SandboxRequest, id: number): unknown => {
  switch (request.op) {
    case 'load':
      return load(request);
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
          : { onLog: (entry: CapturedLog) => post({ kind: 'log', versionId: request.logTag as string, entry }) }),
      });
    case 'rememberedPaths5':
      return isolateOf(request.versionId).rememberedPaths5(request.snapshot);
    case 'definition':
      return isolateOf(request.versionId).definition();
    case 'allowRead':
      return isolateOf(request.versionId).allowRead(request.request);
    case 'allowReads':
      return isolateOf(request.versionId).allowReads(request.request);
    case 'allowWrite':
      return isolateOf(request.versionId).allowWrite(request.request);
    // Step results go back as the harness's JSON texts: parsed once, on the node's side.
    case 'start':
      return isolateOf(request.versionId).startRaw(request.key, request.init, request.options);
    case 'startAuthorized':
      return isolateOf(request.versionId).startAuthorizedRaw(request.key, request.init, request.request, request.options);
    case 'send':
      return isolateOf(request.versionId).sendRaw(request.key, request.event, request.now, request.restore);
    case 'sendAuthorized':
      return isolateOf(request.versionId).sendAuthorizedRaw(request.key, request.caller, request.event, request.now, request.restore);
    case 'advance':
      return isolateOf(request.versionId).advanceRaw(request.key, request.now, request.restore);
    case 'stopChildren':
      return isolateOf(request.versionId).stopChildren(request.key);
    // Asynchronous when the machine code is (it may wait for its fetches and timers): each of its
    // crossings into the isolate is timed on its own (not in TIMED_OPS).
    case 'httpApiHandler':
      return isolateOf(request.versionId).httpApiHandler(
        request.slug,
        request.request,
        request.deadlineMs,
        crossings(id, request.versionId),
      );
    case 'httpApiResponse':
      return isolateOf(request.versionId).httpApiResponse(
        request.slug,
        request.settled,
        request.deadlineMs,
        crossings(id, request.versionId),
      );
    case 'stop':
      isolates.get(request.versionId)?.stop(request.key);
      return true;
    case 'stats':
      return stats();
    case 'unload':
      unloads.set(request.versionId, (unloads.get(request.versionId) ?? 0) + 1);
      isolates.get(request.versionId)?.dispose();
      isolates.delete(request.versionId);
      versionNumbers.delete(request.versionId);
      return true;
  }
};

const stats = (): WorkerStats => ({
  rssBytes: process.memoryUsage.rss(),
  isolates: [...isolates]
    .filter(([, isolate]) => isolate.healthy)
    .map(([versionId, isolate]) => ({ versionId, heapUsedBytes: isolate.heapUsedBytes(), ...isolate.census() })),
});

const load = async (request: Extract<SandboxRequest, { op: 'load' }>): Promise<true> => {
  isolates.get(request.versionId)?.dispose();
  const unloadsBefore = unloads.get(request.versionId) ?? 0;
  const isolate = await VersionIsolate.load({
    versionId: request.versionId,
    code: request.code,
    ...request.settings,
    onLog: (entry) => post({ kind: 'log', versionId: request.versionId, entry }),
    aroundDelivery: (deliver) => timed(DELIVERY, request.versionId, deliver),
  });
  if ((unloads.get(request.versionId) ?? 0) !== unloadsBefore) {
    isolate.dispose();
    throw new SandboxDisposedError();
  }
  isolates.set(request.versionId, isolate);
  versionNumbers.set(request.versionId, request.versionNo);
  watchActivity(request.versionId, isolate);
  const { liveActorMemoryMb } = request.settings;
  if (liveActorMemoryMb > 0) heapWatches.set(isolate, new LiveHeapWatch(liveActorMemoryMb * 1024 * 1024, () => isolate.heapUsedBytes()));
  return true;
};

const serialize = (error: unknown): SerializedError => {
  if (!(error instanceof Error)) return { name: 'MachineCodeError', message: String(error) };
  const out: SerializedError = { name: error.name, message: error.message };
  const extra = error as { limitMs?: unknown; limitMb?: unknown };
  if (typeof extra.limitMs === 'number') out.limitMs = extra.limitMs;
  if (typeof extra.limitMb === 'number') out.limitMb = extra.limitMb;
  return out;
};

const failed = (id: number, request: SandboxRequest, error: unknown): void => {
  // A memory error disposed the isolate: say so, so the node reloads the version.
  if ('versionId' in request && isolates.get(request.versionId)?.healthy === false) {
    isolates.delete(request.versionId);
    post({ kind: 'unhealthy', versionId: request.versionId });
  }
  if (id !== 0) post({ kind: 'response', id, ok: false, error: serialize(error) });
};

const run = ({ id, request }: NodeMessage): void => {
  // Retired by the watchdog: the node has moved this request to another worker already (or does so on
  // this answer); running it here too would run its machine code twice.
  if (slot?.retired) {
    if (id !== 0) post({ kind: 'response', id, ok: false, error: { name: MOVED_ERROR, message: 'the sandbox worker was retired' } });
    return;
  }
  let value: unknown;
  try {
    value =
      slot && TIMED_OPS.has(request.op) && 'versionId' in request
        ? timed(id, request.versionId, () => handle(request, id))
        : handle(request, id);
  } catch (error) {
    failed(id, request, error);
    return;
  }
  if (value instanceof Promise) {
    value.then(
      (settled: unknown) => id !== 0 && post({ kind: 'response', id, ok: true, value: settled }),
      (error: unknown) => failed(id, request, error),
    );
  } else {
    if (id !== 0) post({ kind: 'response', id, ok: true, value });
    if (STEP_OPS.has(request.op) && 'versionId' in request) watchHeap(request.versionId);
  }
};

process.on('message', (batch: Batch<NodeMessage>) => {
  for (const message of batch) run(message);
  // Answer the whole batch in one message, without waiting for the check phase.
  flush();
});

// The node went away: nothing to do here any more.
process.on('disconnect', () => process.exit(0));

// This process belongs to its node, which ends it when it stops (by closing the IPC channel). A stop
// signal sent to the whole process group (systemd's default KillMode, Ctrl-C in a terminal) reaches this
// process too: if it died of it, the node would take that for a crash in the middle of its drain.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);
