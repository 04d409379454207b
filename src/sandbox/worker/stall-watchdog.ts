/**
 * The sandbox worker's stall watchdog: a thread of the worker process that notices when one call into
 * machine code has held the worker's main thread for `stallMs` (a spin up to the CPU limit, an isolate
 * thrashing at its memory limit). Every other request queued in that worker would wait for it, whatever
 * org it belongs to. So the watchdog retires the worker (its main thread runs nothing after the current
 * call) and tells the node which request it is, through a pipe (the IPC channel belongs to the blocked
 * main thread). The node then moves everything else to a fresh worker (sandbox-client.ts).
 */
import { writeSync } from 'node:fs';
import { workerData } from 'node:worker_threads';
import { CallSlot } from './call-slot.js';

export interface WatchdogData {
  buffer: SharedArrayBuffer;
  stallMs: number;
  /** The worker's file descriptor of the pipe the node reads stall reports from. */
  reportFd: number;
}

/** One line on the report pipe. */
export interface StallReport {
  stalled: number;
  startedAt: number;
}

const { buffer, stallMs, reportFd } = workerData as WatchdogData;
const slot = new CallSlot(buffer);

const watching = setInterval(() => {
  const running = slot.running();
  if (!running || Date.now() - running.startedAt < stallMs) return;
  slot.retire();
  clearInterval(watching);
  const report: StallReport = { stalled: running.id, startedAt: running.startedAt };
  try {
    writeSync(reportFd, `${JSON.stringify(report)}\n`);
  } catch {
    // The node is gone: the worker exits when its IPC channel closes.
  }
}, Math.max(5, Math.min(25, Math.floor(stallMs / 4))));
