// Closed loop: C workers, each sends its next event when the previous one is answered. Worker w owns the
// instances i with i % C == w, so no instance ever has two events in flight and its history order is exact.
import { summarize } from './stats.mjs';
import { byWindow } from './windows.mjs';

/**
 * With `timings`, the result also holds when each recorded answer came (ms after `t0Ns`, the loop's start
 * on CLOCK_MONOTONIC, the clock `perf record -k CLOCK_MONOTONIC` stamps samples with) and its latency:
 * what bench/stall-summary.mjs joins with a perf record.
 */
/** What BENCH_TIMINGS keeps of a closed loop's first `count` answers, for bench/stall-summary.mjs. */
export const timingsOf = (t0, doneAtMs, latencies, count) => ({
  t0Ns: String(t0),
  doneMs: Array.from(doneAtMs.subarray(0, count)),
  latencyMs: Array.from(latencies.subarray(0, count)),
});

export const runClosedLoop = async ({ book, pool, concurrency, events, capS, record = true, timings = false }) => {
  const latencies = record ? new Float64Array(events) : undefined;
  const doneAtMs = record ? new Float64Array(events) : undefined;
  const counts = {};
  let issued = 0;
  let acked = 0;
  let recorded = 0;
  let capped = false;
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(capS) * 1_000_000_000n;
  const worker = async (w) => {
    const owned = [];
    for (let i = w; i < book.count; i += concurrency) owned.push(i);
    while (issued < events) {
      if (process.hrtime.bigint() > deadline) {
        capped = true;
        return;
      }
      issued++;
      const i = owned[(Math.random() * owned.length) | 0];
      const { ok, ms } = await book.sendNext(pool, i, counts);
      if (ok) acked++;
      if (latencies) {
        doneAtMs[recorded] = Number(process.hrtime.bigint() - t0) / 1e6;
        latencies[recorded++] = ms;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  return {
    kind: 'closed',
    concurrency,
    issued,
    acked,
    wallS: Number(wallS.toFixed(3)),
    throughput: Number((acked / wallS).toFixed(1)),
    cappedByTime: capped,
    statusCounts: counts,
    latencyMs: latencies ? summarize(latencies.subarray(0, recorded)) : undefined,
    overTime: latencies ? byWindow(doneAtMs.subarray(0, recorded), latencies.subarray(0, recorded), wallS * 1000) : undefined,
    timings: latencies && timings ? timingsOf(t0, doneAtMs, latencies, recorded) : undefined,
  };
};
