/**
 * The slot a sandbox worker's main thread shares with its stall watchdog (src/sandbox/worker/call-slot.ts),
 * and the watchdog itself (stall-watchdog.ts) in a real thread: an idle watchdog sleeps, the next call
 * wakes it, and a call that then holds the thread past the stall limit is still reported.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { CallSlot } from '../src/sandbox/worker/call-slot.js';
import { eventually } from './helpers/eventually.js';

/** A thread that sleeps in the slot once and says how long it slept. */
const sleeper = (slot: CallSlot, timeoutMs: number): Promise<number> => {
  const worker = new Worker(new URL('./fixtures/sandbox/slot-sleeper.js', import.meta.url), {
    workerData: { buffer: slot.buffer, timeoutMs },
  });
  return new Promise((resolve, reject) => {
    worker.once('message', (slept: number) => {
      resolve(slept);
      void worker.terminate();
    });
    worker.once('error', reject);
  });
};

const spinFor = (ms: number): void => {
  const until = Date.now() + ms;
  while (Date.now() < until);
};

t.test('calls begun are counted; a sleep returns at once while a call runs', async (t) => {
  const slot = new CallSlot();
  t.equal(slot.callsBegun, 0);
  slot.begin(7, 1);
  t.equal(slot.callsBegun, 1);
  const started = Date.now();
  slot.sleepUntilCall(5_000);
  t.ok(Date.now() - started < 1_000, 'did not wait: a call is running');
  slot.end();
  t.equal(slot.running(), undefined);
});

t.test('a sleeping watchdog is woken by the next call, and otherwise by its backstop', async (t) => {
  const slot = new CallSlot();
  const backstop = await sleeper(slot, 300);
  t.ok(backstop >= 250 && backstop < 5_000, `no call: it slept until its backstop (${backstop} ms)`);

  const woken = sleeper(slot, 20_000);
  await eventually(() => slot.watchdogAsleep, { message: 'the thread did not sleep' });
  await new Promise((resolve) => setTimeout(resolve, 200));
  slot.begin(1, 1);
  const slept = await woken;
  slot.end();
  t.ok(slept >= 150 && slept < 5_000, `woken by the call after ${slept} ms`);
});

t.test('a call that holds the thread past the stall limit after the watchdog slept is reported', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'statehold-slot-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const reports = join(dir, 'reports');
  const reportFd = openSync(reports, 'w');
  t.teardown(() => closeSync(reportFd));
  const slot = new CallSlot();
  const watchdog = new Worker(new URL('../src/sandbox/worker/stall-watchdog.js', import.meta.url), {
    workerData: { buffer: slot.buffer, stallMs: 100, reportFd },
  });
  t.teardown(() => watchdog.terminate());
  await new Promise<void>((resolve) => watchdog.once('message', () => resolve()));
  // 40 looks 25 ms apart with no call begun, then it sleeps
  await eventually(() => slot.watchdogAsleep, { message: 'the idle watchdog did not sleep' });
  slot.begin(42, 3);
  // Held until the watchdog retires the worker (at most 10 s): it counts this thread's CPU time, which
  // a loaded host hands out slowly (500 ms by the clock once gave it less than the 100 ms limit). That
  // the next call wakes a sleeping watchdog at once is the test above's.
  const until = Date.now() + 10_000;
  while (!slot.retired && Date.now() < until) spinFor(10);
  slot.end();
  const report = await eventually(
    () => {
      const text = readFileSync(reports, 'utf8');
      return text.length > 0 && (JSON.parse(text.split('\n')[0] as string) as { stalled: number; versionNo: number });
    },
    { message: 'the watchdog reported no stall' },
  );
  t.match(report, { stalled: 42, versionNo: 3 });
  t.ok(slot.retired, 'the watchdog retired the worker');
});
