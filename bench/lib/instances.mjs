// The "instances" scenario (issue 21): how cost grows with the number of instances of one version. For
// each K (default 1,000, 100,000 and 1,000,000), on a fresh server with default settings: K instances of
// a small counter machine are created at C in flight through the API (creates/s), then C in flight send
// events to instances picked at random among all K, then among a hot 1 % of them. Each phase reports
// events/s and latency; the server's memory (RSS of the node and its sandbox workers, sampled from
// /proc, and what GET /stats says of the isolate heap and live actors) is read as each phase ends. A
// sample of instances is checked at the end: each one's count equals the events acknowledged for it.
import { writeFileSync } from 'node:fs';
import { signToken } from '@statebacked/token';
import { StateBackedClient } from '@statebacked/client';
import { authHeaders, makePool, outcomeKey, request } from './http.mjs';
import { timingsOf } from './closed-loop.mjs';
import { startSampler } from './proc-sampler.mjs';
import { bundleAsSmply } from './smply-bundle.mjs';
import { summarize } from './stats.mjs';
import { failureText, int } from './markdown-format.mjs';

export const COUNTER = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'counter', initial: 'even', predictableActionArguments: true, context: { n: 0 }, states: {
  even: { on: { INC: { target: 'odd', actions: assign({ n: (c) => c.n + 1 }) } } },
  odd: { on: { INC: { target: 'even', actions: assign({ n: (c) => c.n + 1 }) }, STOP: 'stopped' } },
  stopped: { type: 'final' },
} });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const MACHINE = 'counter';

/**
 * The counter as uploaded: `smply` (the default) bundles xstate inside, as smply 0.1.18 does and as
 * users' machines arrive; `service` leaves the import for the service to resolve.
 */
export const counterCode = async (bundle, repoRoot) => {
  if (bundle === 'service') return COUNTER;
  return bundleAsSmply(COUNTER.replace(/'npm:xstate'/, "'xstate'"), repoRoot);
};
const SAMPLE_CHECKED = 200;

/**
 * C workers, each taking the next of `total` jobs until done or the time cap; `job(i)` returns the
 * request's answer. Latencies of every request, and a tally of outcomes.
 */
const closedLoop = async ({ concurrency, total, capS, job, onProgress, timingsPath }) => {
  const latencies = new Float64Array(total);
  const doneAtMs = timingsPath ? new Float64Array(total) : undefined;
  const counts = {};
  let next = 0;
  let done = 0;
  let capped = false;
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(capS) * 1_000_000_000n;
  const worker = async () => {
    while (next < total) {
      if (process.hrtime.bigint() > deadline) {
        capped = true;
        return;
      }
      const i = next++;
      const answer = await job(i);
      const key = outcomeKey(answer);
      counts[key] = (counts[key] ?? 0) + 1;
      if (doneAtMs) doneAtMs[done] = Number(process.hrtime.bigint() - t0) / 1e6;
      latencies[done++] = answer.ms;
      if (onProgress && done % 100_000 === 0) onProgress(done);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  // BENCH_TIMINGS: every answer's time (ms after t0, CLOCK_MONOTONIC) and latency, for bench/stall-summary.mjs
  if (timingsPath) writeFileSync(timingsPath, JSON.stringify(timingsOf(t0, doneAtMs, latencies, done)));
  return {
    requests: done,
    wallS: Number(wallS.toFixed(2)),
    perSecond: Number(((counts['200'] ?? 0) / wallS).toFixed(1)),
    statusCounts: counts,
    latencyMs: summarize(latencies.subarray(0, done)),
    cappedByTime: capped,
  };
};

const mb = (bytes) => (typeof bytes === 'number' ? Number((bytes / 1024 / 1024).toFixed(1)) : null);

/** What GET /stats says, in MB and counts. */
const memoryNow = async (pool, adminKey) => {
  const answer = await request(pool, 'GET', '/stats', authHeaders(adminKey));
  if (answer.status !== 200) return { error: `${answer.status} ${answer.text.slice(0, 200)}` };
  const s = JSON.parse(answer.text);
  const isolates = s.sandboxWorkers.main?.isolates ?? [];
  return {
    nodeRssMb: mb(s.node.rssBytes),
    nodeHeapMb: mb(s.node.heapUsedBytes),
    workerRssMb: mb(s.sandboxWorkers.main?.rssBytes),
    isolateHeapMb: mb(isolates.reduce((sum, i) => sum + i.heapUsedBytes, 0)),
    heldActors: s.actors.held,
    liveActors: s.actors.live,
    resting: isolates.reduce((sum, i) => sum + i.resting, 0),
    interpreters: isolates.reduce((sum, i) => sum + i.interpreters, 0),
  };
};

const runOneK = async (k, scenario, config, { startServer, repoRoot, log }) => {
  const label = `instances-${k}`;
  const server = await startServer({ repoRoot, adminKey: config.adminKey, label });
  log(`${label}: server pid ${server.pid}`);
  const out = { k };
  const pool = makePool(server.url, scenario.concurrency);
  try {
    const admin = new StateBackedClient(config.adminKey, { apiHost: server.url });
    await admin.machines.create(MACHINE);
    await admin.machineVersions.create(MACHINE, {
      clientInfo: `bench (${scenario.bundle})`,
      makeCurrent: true,
      code: await counterCode(scenario.bundle, repoRoot),
    });
    const key = await admin.keys.create({ name: 'bench', use: 'production' });
    const token = await signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: 'bench' }, { expires: { in: '4h' } });
    const headers = authHeaders(token);
    const acked = new Uint32Array(k);
    const phase = async (name, total, job) => {
      const sampler = startSampler(server.pid, 500);
      const timingsPath = process.env.BENCH_TIMINGS ? `${process.env.BENCH_TIMINGS}.${label}-${name.split(' ')[0]}.json` : undefined;
      const result = await closedLoop({
        concurrency: scenario.concurrency,
        total,
        capS: scenario.capS,
        job,
        timingsPath,
        onProgress: (n) => log(`${label}: ${name} ${n.toLocaleString('en-US')} of ${total.toLocaleString('en-US')}`),
      });
      const sampled = sampler.stop();
      result.rssPeakMb = sampled.rssPeakMb;
      result.rssAnonPeakMb = sampled.rssAnonPeakMb;
      result.cpuPct = sampled.cpuPct;
      // CPU per acknowledged request (µs), by where it ran: the node's main thread, its other threads, the sandbox workers
      const perRequest = (pct) => (pct == null || !result.perSecond ? null : Math.round((pct / 100 / result.perSecond) * 1e6));
      const split = sampled.cpuSplitPct ?? {};
      result.cpuUsPerRequest = { main: perRequest(split.main), nodeOther: perRequest(split.nodeOther), worker: perRequest(split.worker) };
      result.memory = await memoryNow(pool, config.adminKey);
      log(
        `${label}: ${name}: ${result.perSecond}/s, p99 ${result.latencyMs.p99} ms, ${JSON.stringify(result.statusCounts)}, RSS peak ${result.rssPeakMb} MB`,
      );
      return result;
    };
    out.create = await phase('create', k, (i) => request(pool, 'POST', `/machines/${MACHINE}`, headers, { slug: `c${i}` }));
    const send = async (i) => {
      const answer = await request(pool, 'POST', `/machines/${MACHINE}/i/c${i}/events`, headers, { event: 'INC' });
      if (answer.status === 200) acked[i]++;
      return answer;
    };
    const events = scenario.events;
    out.random = await phase('random', events, () => send((Math.random() * k) | 0));
    const hot = Math.max(1, Math.floor(k / 100));
    out.hotInstances = hot;
    out.hot = await phase('hot 1 %', events, () => send((Math.random() * hot) | 0));
    // A sample of the instances (half of them from the hot set): each one's count is its acknowledged events.
    const mismatches = [];
    for (let j = 0; j < SAMPLE_CHECKED; j++) {
      const i = j % 2 === 0 ? (Math.random() * hot) | 0 : (Math.random() * k) | 0;
      const answer = await request(pool, 'GET', `/machines/${MACHINE}/i/c${i}/admin`, authHeaders(config.adminKey));
      const n = answer.status === 200 ? JSON.parse(answer.text).context.n : `status ${answer.status}`;
      if (n !== acked[i]) mismatches.push({ instance: `c${i}`, n, acked: acked[i] });
    }
    out.checked = { instances: SAMPLE_CHECKED, mismatches: mismatches.length, examples: mismatches.slice(0, 3) };
  } catch (err) {
    out.error = String(err?.stack ?? err);
  } finally {
    await pool.close();
    const stopped = await server.stop({ keepData: config.keepData });
    out.serverExit = { code: stopped.code, signal: stopped.signal };
    if (stopped.code !== 0) out.serverStderrTail = stopped.stderrTail;
  }
  return out;
};

export const runInstances = async (scenario, config, deps) => {
  const runs = [];
  for (const k of scenario.ks) runs.push(await runOneK(k, scenario, config, deps));
  return { scenario, instances: runs };
};

/** Whether any request of any K failed, or a checked instance disagreed. */
export const instancesFailed = (r) =>
  !r.instances ||
  r.instances.some(
    (run) =>
      run.error ||
      run.checked?.mismatches > 0 ||
      ['create', 'random', 'hot'].some((p) => Object.keys(run[p]?.statusCounts ?? { missing: 1 }).some((key) => key !== '200')),
  );

export const instancesMarkdown = (r, fmt) => {
  const failures = failureText;
  const s = r.scenario;
  const lines = [
    '',
    `### instances: one version, K instances (C=${s.concurrency}, ${int(s.events)} events per phase)`,
    '',
    'Creates through the API, then events to instances picked at random among all K, then among a hot 1 %. ' +
      "RSS: the node and its sandbox workers, peak while the phase ran (sampled every 0.5 s); in brackets their own memory (RssAnon), without the pages of mapped files (LMDB's database, which the kernel may drop and read again); isolate heap, held and live actors: GET /stats as the phase ended (held: heads in the node's memory; live: in an isolate, resting without an interpreter or with one).",
    '',
    '| K | phase | req/s | p50 | p99 | max | failed | CPU µs/req: main / other / worker | RSS peak MB (own) | node / worker RSS MB | isolate heap MB | held / live actors (resting, interpreters) |',
    '|---:|---|---:|---:|---:|---:|---|---|---:|---|---:|---|',
  ];
  for (const run of r.instances ?? []) {
    for (const [name, p] of [
      ['create', run.create],
      ['random', run.random],
      [`hot 1 % (${int(run.hotInstances)})`, run.hot],
    ]) {
      if (!p) continue;
      const m = p.memory ?? {};
      lines.push(
        `| ${int(run.k)} | ${name} | ${int(p.perSecond)} | ${fmt(p.latencyMs.p50)} | ${fmt(p.latencyMs.p99)} | ${fmt(p.latencyMs.max)} | ${failures(p.statusCounts)}${p.cappedByTime ? ' (time cap)' : ''} | ` +
          `${int(p.cpuUsPerRequest?.main)} / ${int(p.cpuUsPerRequest?.nodeOther)} / ${int(p.cpuUsPerRequest?.worker)} | ` +
          `${int(p.rssPeakMb)} (${int(p.rssAnonPeakMb)}) | ${int(m.nodeRssMb)} / ${int(m.workerRssMb)} | ${fmt(m.isolateHeapMb, 1)} | ${int(m.heldActors)} / ${int(m.liveActors)} (${int(m.resting)}, ${int(m.interpreters)}) |`,
      );
    }
    if (run.checked)
      lines.push(`| ${int(run.k)} | checked | ${run.checked.instances} instances | | | | ${run.checked.mismatches} mismatches | | | | | |`);
    if (run.error) lines.push('', `**K=${run.k} failed:** ${run.error}`);
  }
  const byK = new Map((r.instances ?? []).map((run) => [run.k, run]));
  const small = byK.get(Math.min(...byK.keys()));
  const large = byK.get(Math.max(...byK.keys()));
  if (small && large && small !== large && small.random && large.random) {
    lines.push(
      '',
      `K=${int(large.k)} against K=${int(small.k)}: random events ${fmt(large.random.perSecond / small.random.perSecond)}× the events/s, p99 ${fmt(large.random.latencyMs.p99)} ms; ` +
        `creates ${int(large.create?.perSecond)}/s; RSS peak ${int(Math.max(...['create', 'random', 'hot'].map((p) => large[p]?.rssPeakMb ?? 0)))} MB ` +
        `(own memory ${int(Math.max(...['create', 'random', 'hot'].map((p) => large[p]?.rssAnonPeakMb ?? 0)))} MB).`,
    );
  }
  return lines;
};
