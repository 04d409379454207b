/**
 * The sandbox worker process: hosts the isolates of machine versions for its node (sandbox-host.ts).
 * The node forks it (sandbox-client.ts) and talks to it over IPC; if machine code crashes V8 here, only
 * this process dies and the node starts another. Calls into isolates are synchronous: besides them this
 * process only performs the fetches machine code makes.
 */
import { Worker } from 'node:worker_threads';
import { CallSlot } from './call-slot.js';
import { type Batch, type NodeMessage, parseWorkerArgs, REPORT_FD, type WorkerMessage } from './protocol.js';
import { SandboxHost } from './sandbox-host.js';
import type { WatchdogData } from './stall-watchdog.js';

const { stallMs } = parseWorkerArgs(process.argv.slice(2));

/** Shared with the watchdog thread (call-slot.ts), when the node asked for one. */
const slot = stallMs > 0 ? new CallSlot() : undefined;
/**
 * Batches that came before the watchdog thread watched. A thread takes a while to start (much longer
 * on a busy host), and a call that began before it would hold this worker unnoticed to its CPU limit.
 */
let beforeWatchdog: Batch<NodeMessage>[] | undefined;
if (slot) {
  beforeWatchdog = [];
  const data: WatchdogData = { buffer: slot.buffer, stallMs, reportFd: REPORT_FD };
  const watchdog = new Worker(new URL('./stall-watchdog.js', import.meta.url), { workerData: data });
  watchdog.unref();
  const begin = (): void => {
    const held = beforeWatchdog ?? [];
    beforeWatchdog = undefined;
    for (const batch of held) runBatch(batch);
  };
  watchdog.once('message', begin);
  // Without a watchdog a call still ends at its CPU limit: better that than answering nothing.
  watchdog.once('error', begin);
}

/** Messages for the node, sent together once the current batch (or a part of it, or a callback) is done. */
let outgoing: WorkerMessage[] = [];
let flushScheduled = false;

const flush = (): void => {
  flushScheduled = false;
  if (outgoing.length === 0) return;
  const batch: Batch<WorkerMessage> = outgoing;
  outgoing = [];
  process.send?.(batch);
};

const host = new SandboxHost({
  post: (message) => {
    outgoing.push(message);
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
  },
  ...(slot ? { slot } : {}),
});

/**
 * A batch that runs longer than this is answered in parts: the node commits the first answers while the
 * worker runs the rest, instead of both taking turns (a batch of ≈ 30 events at C=64 held every answer
 * for ≈ 2–4 ms). Measured against answering once per batch, bench/JOURNAL.md 2026-11-28 23:34.
 */
const ANSWER_EVERY_MS = 1;

const runBatch = (batch: Batch<NodeMessage>): void => {
  let answeredAt = performance.now();
  for (const message of batch) {
    host.run(message);
    if (outgoing.length > 0 && performance.now() - answeredAt >= ANSWER_EVERY_MS) {
      flush();
      answeredAt = performance.now();
    }
  }
  // The rest of the batch's answers in one message, without waiting for the check phase.
  flush();
};

process.on('message', (batch: Batch<NodeMessage>) => {
  if (beforeWatchdog) beforeWatchdog.push(batch);
  else runBatch(batch);
});

// The node went away: nothing to do here any more.
process.on('disconnect', () => process.exit(0));

// This process belongs to its node, which ends it when it stops (by closing the IPC channel). A stop
// signal sent to the whole process group (systemd's default KillMode, Ctrl-C in a terminal) reaches this
// process too: if it died of it, the node would take that for a crash in the middle of its drain.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);
