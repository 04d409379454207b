/**
 * The sandbox worker's stall watchdog: a thread of the worker process that notices when one call into
 * machine code has held the worker's main thread for `stallMs` of CPU time (a spin up to the CPU limit,
 * an isolate thrashing at its memory limit). Every other request queued in that worker would wait for it, whatever
 * org it belongs to. So the watchdog retires the worker (its main thread runs nothing after the current
 * call) and tells the node which request it is, through a pipe (the IPC channel belongs to the blocked
 * main thread). The node then moves everything else to a fresh worker (sandbox-client.ts).
 */
import { readFileSync, writeSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { CallSlot } from './call-slot.js';

export interface WatchdogData {
  buffer: SharedArrayBuffer;
  stallMs: number;
  /** The worker's file descriptor of the pipe the node reads stall reports from. */
  reportFd: number;
}

/** One line on the report pipe. */
export interface StallReport {
  /** The request id, or DELIVERY (call-slot.ts). */
  stalled: number;
  startedAt: number;
  /** The node's number of the version whose code held the worker (0: none known). */
  versionNo: number;
  /** CPU time the main thread spent in the call that the watchdog saw (undefined: measured by the clock). */
  cpuMs?: number;
}

const { buffer, stallMs, reportFd } = workerData as WatchdogData;

// Tests stand in for a thread that starts late on a busy host with this (sandbox-neighbours.test.ts).
const lateStartMs = Number(process.env.STATEHOLD_TEST_WATCHDOG_LATE_MS ?? 0);
if (lateStartMs > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, lateStartMs);
const slot = new CallSlot(buffer);

/**
 * CPU time the worker's main thread has run, in ms (Linux: its schedstat, in ns; the main thread's id
 * is the process id), or undefined where that cannot be read.
 *
 * Why CPU time and not the clock: on a busy host a call can wait for a core far longer than it runs,
 * and a clock would then blame whatever innocent call was running (seen: on 2 cores with another org's
 * code spinning, an org whose every call takes 0.1 ms was moved to the quarantine worker beside it).
 * A spin and an isolate thrashing at its memory limit (its collector runs on this thread) both burn CPU.
 */
const schedstat = `/proc/self/task/${process.pid}/schedstat`;
const mainThreadCpuMs = (): number | undefined => {
  try {
    const ns = Number(readFileSync(schedstat, 'latin1').split(' ', 1)[0]);
    return Number.isFinite(ns) ? ns / 1e6 : undefined;
  } catch {
    return undefined;
  }
};

/** The call being watched and the main thread's CPU time when the watchdog first saw it. */
let watched: { id: number; cpuAtFirstSight: number | undefined } | undefined;

const report = (stalled: StallReport): void => {
  slot.retire();
  clearInterval(watching);
  try {
    writeSync(reportFd, `${JSON.stringify(stalled)}\n`);
  } catch {
    // The node is gone: the worker exits when its IPC channel closes.
  }
};

/**
 * After this many looks in a row in which no call began, the watchdog sleeps until the next call
 * begins: an idle worker's watchdog otherwise woke 40 times a second (≈ 1 % of a core per idle worker,
 * measured here). Counted by calls begun, not by calls seen running: under load most looks find none
 * running between short calls, and a watchdog asleep then would cost nearly every call a wake-up.
 */
const IDLE_LOOKS_BEFORE_SLEEP = 40;
/** The longest one sleep lasts (a backstop: see CallSlot.sleepUntilCall). */
const SLEEP_BACKSTOP_MS = 1_000;
let idleLooks = 0;
let begunAtLastLook = slot.callsBegun;

const watching = setInterval(
  () => {
    const begun = slot.callsBegun;
    idleLooks = begun === begunAtLastLook ? idleLooks + 1 : 0;
    begunAtLastLook = begun;
    let running = slot.running();
    if (!running && idleLooks >= IDLE_LOOKS_BEFORE_SLEEP) {
      slot.sleepUntilCall(SLEEP_BACKSTOP_MS);
      running = slot.running();
    }
    if (!running) {
      watched = undefined;
      return;
    }
    if (watched?.id !== running.id) {
      // Counted from here: the call's CPU before this tick (at most one interval) is not.
      watched = { id: running.id, cpuAtFirstSight: mainThreadCpuMs() };
      return;
    }
    const cpuNow = watched.cpuAtFirstSight === undefined ? undefined : mainThreadCpuMs();
    if (cpuNow === undefined || watched.cpuAtFirstSight === undefined) {
      if (Date.now() - running.startedAt >= stallMs)
        report({ stalled: running.id, startedAt: running.startedAt, versionNo: running.versionNo });
      return;
    }
    const cpuMs = cpuNow - watched.cpuAtFirstSight;
    if (cpuMs >= stallMs)
      report({ stalled: running.id, startedAt: running.startedAt, versionNo: running.versionNo, cpuMs: Math.round(cpuMs) });
  },
  Math.max(5, Math.min(25, Math.floor(stallMs / 4))),
);

// The worker's main thread runs no machine code until this arrives (sandbox-worker.ts).
parentPort?.postMessage('watching');
