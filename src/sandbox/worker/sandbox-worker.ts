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

const runBatch = (batch: Batch<NodeMessage>): void => {
  for (const message of batch) host.run(message);
  // Answer the whole batch in one message, without waiting for the check phase.
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
