/** The closed loop's optional timings: what bench/stall-summary.mjs joins with a perf record. */
import assert from 'node:assert/strict';
import t from 'tap';
import { runClosedLoop } from '../bench/lib/closed-loop.mjs';

/** An instance book whose every event takes about 2 ms, as an answered request would. */
const book = {
  count: 8,
  sendNext: async () => {
    await new Promise((resolve) => setTimeout(resolve, 2));
    return { ok: true, ms: 2 };
  },
};

t.test('with timings, each recorded answer has its time after the start (CLOCK_MONOTONIC) and its latency', async (t) => {
  const before = process.hrtime.bigint();
  const result = await runClosedLoop({ book, pool: undefined, concurrency: 2, events: 10, capS: 10, timings: true });
  const after = process.hrtime.bigint();
  assert.ok(result.timings, 'with timings, the result has them');
  const { t0Ns, doneMs, latencyMs } = result.timings;
  t.ok(BigInt(t0Ns) >= before && BigInt(t0Ns) <= after, 'the start on the same clock as process.hrtime');
  t.equal(doneMs.length, 10);
  t.same(latencyMs, Array(10).fill(2));
  // (a 2 ms timer may fire a hair early on CLOCK_MONOTONIC: each answer comes after the start and before the end)
  t.ok(
    doneMs.every((ms: number) => ms > 0 && ms <= Number(after - BigInt(t0Ns)) / 1e6),
    'each answer inside the loop',
  );
  t.equal(result.acked, 10);
});

t.test('without them (the default), or for an unrecorded warm-up, none are kept', async (t) => {
  t.equal((await runClosedLoop({ book, pool: undefined, concurrency: 2, events: 4, capS: 10 })).timings, undefined);
  t.equal(
    (await runClosedLoop({ book, pool: undefined, concurrency: 2, events: 4, capS: 10, record: false, timings: true })).timings,
    undefined,
  );
});
