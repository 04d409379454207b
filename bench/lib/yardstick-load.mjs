// The `yardstick` scenario's load generator (bench/lib/yardstick.mjs forks one per target and round), so
// that the load shares no event loop with the driver, which samples /proc meanwhile. The same code for
// Statehold and for the yardstick service: only the target's API differs (counter-book.mjs). argv[2] is
// { target: { kind, url, token?, machine? }, instances, connections }. Driven over IPC by request/answer
// messages: create, loop (closed-loop.mjs: worker w owns the counters i ≡ w mod C, a random one of them
// per event), verify.
import { makePool, outcomeKey, tally } from './http.mjs';
import { runClosedLoop } from './closed-loop.mjs';
import { summarize } from './stats.mjs';
import { CounterBook, counterApi } from './counter-book.mjs';

const { target, instances, connections } = JSON.parse(process.argv[2]);
const book = new CounterBook({ api: counterApi(target), count: instances });
const pool = makePool(target.url, connections);

/** `concurrency` at a time over every counter: `job(i)` → { status, ms }; outcomes tallied, latencies summarised. */
const eachCounter = async (concurrency, job) => {
  const counts = {};
  const latencies = [];
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, book.count) }, async () => {
      while (next < book.count) {
        const i = next++;
        const answer = await job(i);
        if (answer) {
          tally(counts, outcomeKey(answer));
          latencies.push(answer.ms);
        }
      }
    }),
  );
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  return {
    wallS: Number(wallS.toFixed(3)),
    perSecond: Number((book.count / wallS).toFixed(1)),
    statusCounts: counts,
    latencyMs: summarize(latencies),
  };
};

const create = ({ concurrency }) => eachCounter(concurrency, (i) => book.create(pool, i));

const loop = async ({ concurrency, events, capS, record }) => {
  const cpu0 = process.cpuUsage();
  const result = await runClosedLoop({ book, pool, concurrency, events, capS, record });
  const cpu = process.cpuUsage(cpu0);
  result.generatorCpuS = (cpu.user + cpu.system) / 1e6;
  return result;
};

/** Every counter read back: its count must be the sum of its acknowledged INCs. */
const verify = async ({ concurrency }) => {
  const examples = [];
  let mismatches = 0;
  let lost = 0;
  let unreadable = 0;
  await eachCounter(concurrency, async (i) => {
    const read = await book.read(pool, i);
    if (read.error === undefined && book.matches(i, read.count)) return undefined;
    mismatches++;
    if (read.error !== undefined) unreadable++;
    else if (read.count < book.acked[i]) lost++;
    if (examples.length < 5)
      examples.push({ counter: book.key(i), acked: book.acked[i], doubt: book.doubt[i], got: read.count ?? read.error });
    return undefined;
  });
  return {
    counters: book.count,
    ackedSum: book.acked.reduce((a, b) => a + b, 0),
    mismatches,
    lost,
    unreadable,
    examples,
    answerMismatches: book.answerMismatches,
    answerMismatchExamples: book.answerMismatchExamples,
    ok: mismatches === 0 && book.answerMismatches === 0,
  };
};

const ops = { create, loop, verify };
process.on('message', async ({ id, op, args }) => {
  try {
    if (!ops[op]) throw new Error(`unknown op ${op}`);
    process.send({ id, result: await ops[op](args ?? {}) });
  } catch (err) {
    process.send({ id, error: String(err?.stack ?? err) });
  }
});
process.on('disconnect', () => {
  pool.close().finally(() => process.exit(0));
});
process.send({ ready: true });
