// The load generator, run as its own process by run.mjs (so it shares no event loop with the server).
// argv[2] is a JSON object: { url, token, machine, prefix, scenario }. It reports over the IPC channel:
//   { type: 'phase', phase: 'create' | 'warmup' | 'measure' | 'measured' }   as it goes, then
//   { type: 'result', result }   with the figures and the per-instance log of events sent.
import { writeFileSync } from 'node:fs';
import { InstanceBook } from './lib/instance-book.mjs';
import { makePool, authHeaders, request, outcomeKey, tally } from './lib/http.mjs';
import { runClosedLoop } from './lib/closed-loop.mjs';
import { runOpenLoop } from './lib/open-loop.mjs';
import { summarize } from './lib/stats.mjs';

const SETUP_CONCURRENCY = 16;
const WARMUP_CONCURRENCY_OPEN = 16;

const params = JSON.parse(process.argv[2]);
const { url, token, machine, prefix, scenario } = params;
const send = (message) => new Promise((resolve) => process.send(message, resolve));
// monoUs is CLOCK_MONOTONIC in µs, the clock V8 stamps .cpuprofile samples with, so run.mjs can cut the
// server's profile down to the measured phase.
const phase = (name) => send({ type: 'phase', phase: name, at: Date.now(), monoUs: Number(process.hrtime.bigint() / 1000n) });

const headers = authHeaders(token);
const book = new InstanceBook({ machine, prefix, count: scenario.instances, headers });

/** Creates every instance, SETUP_CONCURRENCY at a time; returns timing and outcomes. */
const createInstances = async () => {
  const pool = makePool(url, SETUP_CONCURRENCY);
  const latencies = [];
  const counts = {};
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: SETUP_CONCURRENCY }, async () => {
      while (next < book.count) {
        const i = next++;
        const result = await request(pool, 'POST', `/machines/${machine}`, headers, book.createBody(i));
        tally(counts, outcomeKey(result));
        latencies.push(result.ms);
      }
    }),
  );
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  await pool.close();
  return {
    instances: book.count,
    wallS: Number(wallS.toFixed(3)),
    perSecond: Number((book.count / wallS).toFixed(1)),
    statusCounts: counts,
    latencyMs: summarize(latencies),
  };
};

const main = async () => {
  await phase('create');
  const create = await createInstances();
  if ((create.statusCounts['200'] ?? 0) !== book.count) {
    await send({ type: 'result', result: { error: 'instance creation failed', create } });
    return;
  }

  const connections = scenario.kind === 'closed' ? scenario.concurrency : scenario.maxConnections;
  const pool = makePool(url, connections);

  let warmup;
  if (scenario.warmupEvents > 0) {
    await phase('warmup');
    const concurrency = scenario.kind === 'closed' ? scenario.concurrency : Math.min(WARMUP_CONCURRENCY_OPEN, book.count);
    warmup = await runClosedLoop({ book, pool, concurrency, events: scenario.warmupEvents, capS: scenario.capS, record: false });
  }

  await phase('measure');
  const cpu0 = process.cpuUsage();
  const measure =
    scenario.kind === 'closed'
      ? await runClosedLoop({
          book,
          pool,
          concurrency: scenario.concurrency,
          events: scenario.events,
          capS: scenario.capS,
          timings: Boolean(process.env.BENCH_TIMINGS),
        })
      : await runOpenLoop({ book, pool, rate: scenario.rate, durationS: scenario.durationS, capS: scenario.capS });
  const cpu = process.cpuUsage(cpu0);
  await phase('measured');
  if (measure.timings) {
    // BENCH_TIMINGS: every answer's time and latency, for bench/stall-summary.mjs (closed loops only).
    writeFileSync(`${process.env.BENCH_TIMINGS}.${scenario.id}.json`, JSON.stringify(measure.timings));
    delete measure.timings;
  }
  measure.generatorCpuPct = Number((((cpu.user + cpu.system) / 1e6 / measure.wallS) * 100).toFixed(1));
  await pool.close();

  await send({
    type: 'result',
    result: {
      create,
      warmup,
      measure,
      stateMismatches: book.stateMismatches,
      stateMismatchExamples: book.stateMismatchExamples,
      log: book.log,
    },
  });
};

main().then(
  () => process.disconnect(),
  async (err) => {
    await send({ type: 'result', result: { error: String(err?.stack ?? err) } });
    process.disconnect();
    process.exitCode = 1;
  },
);
