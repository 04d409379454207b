// The "realtime" scenario: what websocket subscribers (GET /rt) cost the event path, and how fast their
// updates arrive. On one fresh server, K instances of a small counter machine with a public context
// take events at a steady rate (open loop, bench/lib/open-loop.mjs) through HTTP, in alternating windows:
// without any websocket, then with S subscribers (one `ws` socket each, S / K per instance, in forked
// processes: bench/lib/realtime-subscribers.mjs), and so on for a few rounds, since the host is noisy.
// Each window gives the HTTP events/s and latency and the server's CPU and RSS; each subscribed window
// also gives every update's delivery delay: from the moment the sender had the event's HTTP answer to
// the moment each subscriber of its instance received the update with the same `ts`, both read from
// CLOCK_MONOTONIC (process.hrtime, one clock for every process on the host).
import { fileURLToPath } from 'node:url';
import { signToken } from '@statebacked/token';
import { StateBackedClient } from '@statebacked/client';
import { authHeaders, makePool, outcomeKey, request, tally } from './http.mjs';
import { runOpenLoop } from './open-loop.mjs';
import { startSampler } from './proc-sampler.mjs';
import { round, summarize } from './stats.mjs';
import { int } from './markdown-format.mjs';
import { startForked } from './forked-driver.mjs';

export const RT_MACHINE = 'rt-counter';

export const RT_COUNTER = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'rt-counter', initial: 'even', predictableActionArguments: true,
  context: { n: 0, public: { count: 0 } },
  states: {
    even: { tags: ['even'], on: { INC: { target: 'odd', actions: 'inc' } } },
    odd: { tags: ['odd'], on: { INC: { target: 'even', actions: 'inc' } } },
  },
}, { actions: { inc: assign({ n: (c) => c.n + 1, public: (c) => ({ count: c.n + 1 }) }) } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const SUBSCRIBERS_SCRIPT = fileURLToPath(new URL('./realtime-subscribers.mjs', import.meta.url));
const CHECKED_INSTANCES = 100;

const mono = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const median = (values) => {
  const xs = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (xs.length === 0) return null;
  const mid = xs.length >> 1;
  return xs.length % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
};

/** Subscribers of each instance when subscriber s watches instance s mod K. */
export const subscribersPerInstance = (subscribers, instances) =>
  Array.from({ length: instances }, (_, i) => Math.floor(subscribers / instances) + (i < subscribers % instances ? 1 : 0));

/** Splits S subscribers into `processes` contiguous ranges [from, to). */
export const splitRanges = (subscribers, processes) => {
  const n = Math.max(1, Math.min(processes, subscribers));
  return Array.from({ length: n }, (_, p) => ({ from: Math.floor((p * subscribers) / n), to: Math.floor(((p + 1) * subscribers) / n) }));
};

/**
 * Matches what the subscribers received with what the sender had answered. `sent`: { inst, ts, at }
 * columns of the window's acknowledged events (`at`: when the answer arrived, monotonic ms). `receipts`:
 * { sub, ts, at, wall } columns (subscriber s watches instance s mod K). Returns the delays (ms, may be
 * negative: the node publishes an update when it commits, as it writes the answer) and the counts.
 */
export const deliveryFigures = ({ sent, receipts, perInstance, wallS }) => {
  const K = perInstance.length;
  const byInstance = Array.from({ length: K }, () => new Map());
  let expected = 0;
  for (let k = 0; k < sent.ts.length; k++) {
    byInstance[sent.inst[k]].set(sent.ts[k], sent.at[k]);
    expected += perInstance[sent.inst[k]];
  }
  const delays = [];
  const sinceCommit = [];
  let unmatched = 0;
  for (const r of receipts) {
    for (let k = 0; k < r.ts.length; k++) {
      const httpAt = byInstance[r.sub[k] % K].get(r.ts[k]);
      if (httpAt === undefined) {
        unmatched++;
        continue;
      }
      delays.push(r.at[k] - httpAt);
      sinceCommit.push(r.wall[k] - r.ts[k]);
    }
  }
  return {
    events: sent.ts.length,
    expected,
    received: delays.length,
    missed: expected - delays.length,
    unmatched,
    perSecond: wallS > 0 ? round(delays.length / wallS, 1) : null,
    delayMs: summarize(delays),
    sinceCommitMs: summarize(sinceCommit),
  };
};

/** One forked subscriber process (realtime-subscribers.mjs). */
const startSubscribers = ({ params, log }) =>
  startForked({ script: SUBSCRIBERS_SCRIPT, params, name: 'subscriber process', log, serialization: 'advanced' });

const mb = (bytes) => (typeof bytes === 'number' ? Number((bytes / 1024 / 1024).toFixed(1)) : null);

/** The parts of an open-loop result the report uses, and the server's figures over the window. */
const windowFigures = (loop, server) => {
  const perEvent = (pct) => (pct == null || !loop.throughput ? null : Math.round((pct / 100 / loop.throughput) * 1e6));
  const split = server.cpuSplitPct ?? {};
  return {
    throughput: loop.throughput,
    acked: loop.acked,
    scheduled: loop.scheduled,
    wallS: loop.wallS,
    cappedByTime: loop.cappedByTime,
    statusCounts: loop.statusCounts,
    latencyMs: loop.latencyMs,
    serviceLatencyMs: loop.serviceLatencyMs,
    sendLagMs: loop.sendLagMs,
    maxInFlight: loop.maxInFlight,
    server: {
      cpuPct: server.cpuPct,
      cpuSplitPct: server.cpuSplitPct,
      cpuUsPerEvent: {
        main: perEvent(split.main),
        nodeOther: perEvent(split.nodeOther),
        worker: perEvent(split.worker),
        total: perEvent(server.cpuPct),
      },
      waitingForCpuPct: server.waitingForCpuPct,
      rssPeakMb: server.rssPeakMb,
      rssEndMb: server.rssEndMb,
      rssAnonPeakMb: server.rssAnonPeakMb,
      hostBusyCores: server.hostBusyCores,
    },
  };
};

export const runRealtime = async (scenario, config, { startServer, repoRoot, log }) => {
  const label = scenario.id;
  const K = scenario.instances;
  const S = scenario.subscribers;
  const perInstance = subscribersPerInstance(S, K);
  const names = Array.from({ length: K }, (_, i) => `i${i}`);
  const server = await startServer({ repoRoot, adminKey: config.adminKey, label });
  log(`${label}: server pid ${server.pid} at ${server.url}`);
  const out = { scenario, rounds: [], setup: {} };
  const children = [];
  const pool = makePool(server.url, scenario.concurrency);
  const adminPool = makePool(server.url, 2);
  // The whole scenario is bounded: the open loops stop at their cap and every subscriber call has a
  // timeout, but should anything still hang, the children and the server are killed, which ends it.
  const budgetS = scenario.rounds * (2 * Math.min(scenario.capS, scenario.seconds * 2 + 10) + 120) + scenario.warmupS + 120;
  let timedOut = false;
  const watchdog = setTimeout(() => {
    timedOut = true;
    log(`${label}: exceeded ${budgetS} s, killing its subscribers and server`);
    for (const c of children) c.kill();
    server.stop();
  }, budgetS * 1000);
  try {
    const admin = new StateBackedClient(config.adminKey, { apiHost: server.url });
    await admin.machines.create(RT_MACHINE);
    await admin.machineVersions.create(RT_MACHINE, { clientInfo: 'bench', makeCurrent: true, code: RT_COUNTER });
    const key = await admin.keys.create({ name: 'bench', use: 'production' });
    // One token per auth context: the sender uses the first; subscribers of an instance take them in turn.
    const tokens = await Promise.all(
      Array.from({ length: scenario.authContexts }, (_, j) =>
        signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: `bench-${j}` }, { expires: { in: '2h' } }),
      ),
    );
    const headers = authHeaders(tokens[0]);
    const t0 = mono();
    for (let i = 0; i < K; i++) {
      const answer = await request(pool, 'POST', `/machines/${RT_MACHINE}`, headers, { slug: names[i] });
      if (answer.status !== 200) throw new Error(`creating ${names[i]}: ${answer.status} ${answer.text}`);
    }
    out.setup.createMs = round(mono() - t0, 1);

    const acked = new Uint32Array(K);
    /** The acknowledged events of the window being recorded (instance, ts, answer time). */
    let rec;
    const book = {
      count: K,
      sendNext: async (_pool, i, counts) => {
        const answer = await request(pool, 'POST', `/machines/${RT_MACHINE}/i/${names[i]}/events`, headers, { event: 'INC' });
        const at = mono();
        tally(counts, outcomeKey(answer));
        if (answer.status !== 200) return { ok: false, ms: answer.ms };
        acked[i]++;
        if (rec) {
          rec.inst.push(i);
          rec.ts.push(JSON.parse(answer.text).ts);
          rec.at.push(at);
        }
        return { ok: true, ms: answer.ms };
      },
    };
    const capS = Math.min(scenario.capS, scenario.seconds * 2 + 10);
    const openLoop = (durationS) => runOpenLoop({ book, pool, rate: scenario.rate, durationS, capS });
    const rtStats = async () => {
      const answer = await request(adminPool, 'GET', '/stats', authHeaders(config.adminKey));
      if (answer.status !== 200) return { error: `${answer.status}` };
      const s = JSON.parse(answer.text);
      return { ...s.realtime, nodeRssMb: mb(s.node?.rssBytes), nodeHeapMb: mb(s.node?.heapUsedBytes) };
    };

    if (scenario.warmupS > 0) {
      log(`${label}: warm-up, ${scenario.warmupS} s at ${scenario.rate}/s without subscribers`);
      const w = await openLoop(scenario.warmupS);
      out.setup.warmup = { throughput: w.throughput, statusCounts: w.statusCounts, p99: w.latencyMs.p99 };
    }

    const ranges = splitRanges(S, scenario.processes);
    for (const { from, to } of ranges) {
      children.push(await startSubscribers({ params: { url: server.url, machine: RT_MACHINE, names, tokens, from, to }, log }));
    }
    const everyChild = (op, args, timeoutMs) => Promise.all(children.map((c) => c.call(op, args, timeoutMs)));

    for (let r = 0; r < scenario.rounds && !timedOut; r++) {
      const round_ = { round: r + 1 };
      out.rounds.push(round_);

      // Without subscribers: no websocket open at all.
      log(`${label}: round ${r + 1}: ${scenario.seconds} s at ${scenario.rate}/s without subscribers`);
      let sampler = startSampler(server.pid, config.sampleMs);
      let senderCpu0 = process.cpuUsage();
      let loop = await openLoop(scenario.seconds);
      round_.base = windowFigures(loop, sampler.stop());
      round_.base.senderCpuPct = cpuPctSince(senderCpu0, loop.wallS);
      round_.base.realtime = await rtStats();
      log(
        `${label}: round ${r + 1}: without: ${loop.throughput}/s, p50 ${loop.latencyMs.p50} ms, p99 ${loop.latencyMs.p99} ms, ${JSON.stringify(loop.statusCounts)}`,
      );

      // With subscribers.
      const connected = await everyChild('connect', { timeoutMs: 30_000 }, 45_000);
      round_.connect = {
        opened: connected.reduce((a, c) => a + c.opened, 0),
        failed: connected.reduce((a, c) => a + c.failed, 0),
        firstFrames: connected.reduce((a, c) => a + c.firstFrames, 0),
        subscribedMs: Math.max(...connected.map((c) => c.subscribedMs)),
      };
      log(
        `${label}: round ${r + 1}: ${round_.connect.opened} sockets open, ${round_.connect.firstFrames} first states in ${round_.connect.subscribedMs} ms`,
      );
      // A short unrecorded warm-up with subscribers (the publish path's first runs), then the window.
      await openLoop(Math.min(2, scenario.seconds));
      await sleep(200);
      await everyChild('collect', {}, 30_000);
      log(`${label}: round ${r + 1}: ${scenario.seconds} s at ${scenario.rate}/s with ${S} subscribers`);
      rec = { inst: [], ts: [], at: [] };
      sampler = startSampler(server.pid, config.sampleMs);
      const subSamplers = children.map((c) => startSampler(c.pid, config.sampleMs));
      senderCpu0 = process.cpuUsage();
      loop = await openLoop(scenario.seconds);
      const serverSampled = sampler.stop();
      const subsSampled = subSamplers.map((s) => s.stop());
      const senderCpuPct = cpuPctSince(senderCpu0, loop.wallS);
      const sent = { inst: Uint32Array.from(rec.inst), ts: Float64Array.from(rec.ts), at: Float64Array.from(rec.at) };
      rec = undefined;
      // Updates still on their way: wait until every expected one came, or nothing new came for 1 s (at most 5 s).
      const expected = sent.inst.reduce((sum, i) => sum + perInstance[i], 0);
      const graceStart = mono();
      let last = -1;
      let lastChange = mono();
      for (;;) {
        const counts = await everyChild('count', {}, 10_000);
        const received = counts.reduce((a, c) => a + c.received, 0);
        if (received !== last) lastChange = mono();
        last = received;
        if (received >= expected || mono() - lastChange > 1_000 || mono() - graceStart > 5_000) break;
        await sleep(50);
      }
      const collected = await everyChild('collect', {}, 30_000);
      round_.subs = windowFigures(loop, serverSampled);
      round_.subs.senderCpuPct = senderCpuPct;
      round_.subs.subscriberCpuPct = subsSampled.map((s) => s.cpuPct);
      round_.subs.subscriberRssMb = subsSampled.map((s) => s.rssPeakMb);
      round_.subs.realtime = await rtStats();
      round_.delivery = deliveryFigures({ sent, receipts: collected.map((c) => c.receipts), perInstance, wallS: loop.wallS });
      round_.problems = mergeProblems(collected.map((c) => c.problems));
      const d = round_.delivery;
      log(
        `${label}: round ${r + 1}: with: ${loop.throughput}/s, p50 ${loop.latencyMs.p50} ms, p99 ${loop.latencyMs.p99} ms, ${JSON.stringify(loop.statusCounts)}; ` +
          `delivery p50 ${d.delayMs.p50} p99 ${d.delayMs.p99} max ${d.delayMs.max} ms, ${d.perSecond} updates/s, missed ${d.missed} of ${d.expected}`,
      );
      const closed = await everyChild('close', { timeoutMs: 10_000 }, 20_000);
      round_.closedMs = Math.max(...closed.map((c) => c.closedMs));
      await sleep(300); // the node handles the closes before the next window
    }

    // Each instance counted exactly its acknowledged events.
    const mismatches = [];
    for (let i = 0; i < Math.min(K, CHECKED_INSTANCES); i++) {
      const answer = await request(adminPool, 'GET', `/machines/${RT_MACHINE}/i/${names[i]}/admin`, authHeaders(config.adminKey));
      const n = answer.status === 200 ? JSON.parse(answer.text).context.n : `status ${answer.status}`;
      if (n !== acked[i]) mismatches.push({ instance: names[i], n, acked: acked[i] });
    }
    out.checked = { instances: Math.min(K, CHECKED_INSTANCES), mismatches: mismatches.length, examples: mismatches.slice(0, 3) };
    out.summary = summarizeRounds(out.rounds);
  } catch (err) {
    out.error = String(err?.stack ?? err);
  } finally {
    clearTimeout(watchdog);
    if (timedOut) out.error = `${out.error ? out.error + '; ' : ''}stopped by the ${budgetS} s watchdog`;
    await Promise.all(children.map((c) => c.stop()));
    await pool.close().catch(() => {});
    await adminPool.close().catch(() => {});
    const stopped = await server.stop({ keepData: config.keepData });
    out.serverExit = { code: stopped.code, signal: stopped.signal };
    if (stopped.code !== 0) out.serverStderrTail = stopped.stderrTail;
    if (config.keepData) out.dataDir = server.dataDir;
    await sleep(100);
    for (const c of children) c.kill();
  }
  return out;
};

const cpuPctSince = (before, wallS) => {
  const d = process.cpuUsage(before);
  return wallS > 0 ? round(((d.user + d.system) / 1e6 / wallS) * 100, 1) : null;
};

const mergeProblems = (list) => {
  const merged = { errorFrames: {}, wrongInstance: 0, outOfOrder: 0, unparsable: 0, unexpectedCloses: {}, socketErrors: {} };
  for (const p of list) {
    for (const key of ['wrongInstance', 'outOfOrder', 'unparsable']) merged[key] += p[key];
    for (const key of ['errorFrames', 'unexpectedCloses', 'socketErrors'])
      for (const [k, n] of Object.entries(p[key])) merged[key][k] = (merged[key][k] ?? 0) + n;
  }
  return merged;
};

/**
 * The headline figures over the rounds: medians of each window's figures (the host is noisy), the
 * worst max, the sum of missed updates, and the ratios with subscribers against without.
 */
export const summarizeRounds = (rounds) => {
  const done = rounds.filter((r) => r.base && r.subs && r.delivery);
  const med = (pick) => median(done.map(pick));
  const base = {
    throughput: med((r) => r.base.throughput),
    p50: med((r) => r.base.latencyMs.p50),
    p99: med((r) => r.base.latencyMs.p99),
    cpuPct: med((r) => r.base.server.cpuPct),
    cpuUsPerEvent: med((r) => r.base.server.cpuUsPerEvent.total),
    rssPeakMb: med((r) => r.base.server.rssPeakMb),
  };
  const subs = {
    throughput: med((r) => r.subs.throughput),
    p50: med((r) => r.subs.latencyMs.p50),
    p99: med((r) => r.subs.latencyMs.p99),
    cpuPct: med((r) => r.subs.server.cpuPct),
    cpuUsPerEvent: med((r) => r.subs.server.cpuUsPerEvent.total),
    rssPeakMb: med((r) => r.subs.server.rssPeakMb),
  };
  const ratio = (a, b) => (a == null || !b ? null : round(a / b, 3));
  return {
    rounds: done.length,
    base,
    subs,
    ratio: {
      throughput: ratio(subs.throughput, base.throughput),
      p50: ratio(subs.p50, base.p50),
      p99: ratio(subs.p99, base.p99),
      cpuUsPerEvent: ratio(subs.cpuUsPerEvent, base.cpuUsPerEvent),
    },
    delivery: {
      p50: med((r) => r.delivery.delayMs.p50),
      p99: med((r) => r.delivery.delayMs.p99),
      max: done.length ? Math.max(...done.map((r) => r.delivery.delayMs.max ?? -Infinity)) : null,
      sinceCommitP99: med((r) => r.delivery.sinceCommitMs.p99),
      perSecond: med((r) => r.delivery.perSecond),
      expected: done.reduce((a, r) => a + r.delivery.expected, 0),
      missed: done.reduce((a, r) => a + r.delivery.missed, 0),
      unmatched: done.reduce((a, r) => a + r.delivery.unmatched, 0),
    },
  };
};

/** Any failed request, subscriber error, socket that did not open or subscribe, or count mismatch fails it; missed updates do not (reported). */
export const realtimeFailed = (r) =>
  Boolean(r.error) ||
  !r.rounds?.length ||
  r.checked?.mismatches > 0 ||
  r.rounds.some(
    (round_) =>
      !round_.base ||
      !round_.subs ||
      [round_.base, round_.subs].some((w) => Object.keys(w.statusCounts ?? {}).some((key) => key !== '200')) ||
      round_.connect?.failed > 0 ||
      round_.connect?.firstFrames !== round_.connect?.opened ||
      Object.keys(round_.problems?.errorFrames ?? {}).length > 0 ||
      Object.keys(round_.problems?.unexpectedCloses ?? {}).length > 0 ||
      round_.problems?.wrongInstance > 0 ||
      round_.problems?.outOfOrder > 0,
  );

/** Busy cores on the host over a window, and in brackets what neither the server nor the bench's processes used. */
const hostText = (w) => {
  const busy = w.server.hostBusyCores;
  if (busy == null) return '–';
  const ours = [w.server.cpuPct, w.senderCpuPct, ...(w.subscriberCpuPct ?? [])].reduce((a, x) => a + (x ?? 0), 0) / 100;
  return `${busy.toFixed(2)} (${Math.max(0, busy - ours).toFixed(2)})`;
};

/** The report's lines for this scenario. */
export const realtimeMarkdown = (r, fmt) => {
  const s = r.scenario;
  const bad = (counts = {}) =>
    Object.entries(counts)
      .filter(([key]) => key !== '200')
      .map(([key, n]) => `${n}× ${key}`)
      .join(', ') || '0';
  const lines = [
    '',
    `### realtime: ${int(s.subscribers)} websocket subscribers over ${int(s.instances)} instances, ${int(s.rate)} events/s`,
    '',
    `One server; HTTP events at ${int(s.rate)}/s (open loop, latency from the scheduled time, ${s.concurrency} connections) in ${s.seconds} s windows, ` +
      `alternately without any websocket and with ${int(s.subscribers)} subscribers (one \`ws\` socket each, ${int(s.subscribers / s.instances)} per instance, ` +
      `${s.processes} subscriber process${s.processes === 1 ? '' : 'es'}, ${s.authContexts} auth context${s.authContexts === 1 ? '' : 's'}). ` +
      'Delivery delay: from the sender having the HTTP answer to each subscriber receiving the update with the same `ts` (CLOCK_MONOTONIC in both processes); ' +
      "negative when the update came first (or the sender's event loop was late to read its answer). Server CPU µs/event: the server and its workers over the window ÷ events. " +
      'Host busy cores: every process on the host; in brackets what neither the server, the sender nor the subscriber processes used: above ≈ 0.1 other work disturbed the figures.',
    '',
    '| round | window | HTTP ev/s | p50 | p99 | max | non-200 | server CPU % | CPU µs/ev | RSS peak MB | host busy cores (others) | delivery p50 | p99 | max | updates/s | missed / expected | subscriber CPU % |',
    '|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const round_ of r.rounds ?? []) {
    for (const [name, w] of [
      ['without', round_.base],
      ['with', round_.subs],
    ]) {
      if (!w) continue;
      const d = name === 'with' ? round_.delivery : undefined;
      lines.push(
        `| ${round_.round} | ${name} | ${int(w.throughput)} | ${fmt(w.latencyMs.p50)} | ${fmt(w.latencyMs.p99)} | ${fmt(w.latencyMs.max)} | ${bad(w.statusCounts)}${w.cappedByTime ? ' (time cap)' : ''} | ` +
          `${fmt(w.server.cpuPct, 0)} | ${int(w.server.cpuUsPerEvent.total)} | ${int(w.server.rssPeakMb)} | ${hostText(w)} | ` +
          (d
            ? `${fmt(d.delayMs.p50)} | ${fmt(d.delayMs.p99)} | ${fmt(d.delayMs.max)} | ${int(d.perSecond)} | ${int(d.missed)} / ${int(d.expected)} | ${(w.subscriberCpuPct ?? []).map((x) => fmt(x, 0)).join(' + ')} |`
            : '| | | | | |'),
      );
    }
  }
  const m = r.summary;
  if (m && m.rounds > 0) {
    const aim = (ok) => (ok ? 'met' : '**not met**');
    lines.push(
      '',
      `Medians over ${m.rounds} round${m.rounds === 1 ? '' : 's'}: without subscribers ${int(m.base.throughput)} ev/s, p50 ${fmt(m.base.p50)}, p99 ${fmt(m.base.p99)} ms, ${int(m.base.cpuUsPerEvent)} µs CPU/event; ` +
        `with ${int(s.subscribers)} ${int(m.subs.throughput)} ev/s, p50 ${fmt(m.subs.p50)}, p99 ${fmt(m.subs.p99)} ms, ${int(m.subs.cpuUsPerEvent)} µs CPU/event ` +
        `(with ÷ without: ev/s ${fmt(m.ratio.throughput, 3)}, p99 ${fmt(m.ratio.p99)}, CPU/event ${fmt(m.ratio.cpuUsPerEvent)}). ` +
        `Delivery p50 ${fmt(m.delivery.p50)}, p99 ${fmt(m.delivery.p99)}, max ${fmt(m.delivery.max)} ms (p99 since the commit's ts ${fmt(m.delivery.sinceCommitP99)} ms); ` +
        `${int(m.delivery.perSecond)} updates/s; missed ${int(m.delivery.missed)} of ${int(m.delivery.expected)}${m.delivery.unmatched ? `, ${int(m.delivery.unmatched)} unmatched` : ''}.`,
      '',
      `Aims (issue, not asserted): delivery p99 under 5 ms at ${int(s.subscribers)} subscribers: ${aim(m.delivery.p99 != null && m.delivery.p99 < 5)} (${fmt(m.delivery.p99)} ms); ` +
        `HTTP path within 10 % of its figures without subscribers: ev/s ${aim(m.ratio.throughput != null && m.ratio.throughput >= 0.9)} (${fmt(m.ratio.throughput, 3)}), ` +
        `p99 ${aim(m.ratio.p99 != null && m.ratio.p99 <= 1.1)} (${fmt(m.ratio.p99)}×).`,
    );
  }
  const stats = (r.rounds ?? []).map((x) => x.subs?.realtime).filter(Boolean);
  if (stats.length)
    lines.push(
      '',
      `GET /stats at the end of each subscribed window: ${stats.map((x) => `${x.sockets} sockets, ${x.subscribedInstances} instances, ${x.upgrades} upgrades`).join('; ')}.`,
    );
  for (const round_ of r.rounds ?? []) {
    const p = round_.problems;
    if (!p) continue;
    const parts = [];
    for (const key of ['errorFrames', 'unexpectedCloses', 'socketErrors'])
      if (Object.keys(p[key]).length) parts.push(`${key} ${JSON.stringify(p[key])}`);
    for (const key of ['wrongInstance', 'outOfOrder', 'unparsable']) if (p[key]) parts.push(`${key} ${p[key]}`);
    if (round_.connect && (round_.connect.failed || round_.connect.firstFrames !== round_.connect.opened))
      parts.push(`connect ${JSON.stringify(round_.connect)}`);
    if (parts.length) lines.push('', `**realtime round ${round_.round}:** ${parts.join('; ')}`);
  }
  if (r.checked)
    lines.push(
      '',
      `Counts checked on ${r.checked.instances} instances: ${r.checked.mismatches} mismatches${r.checked.mismatches ? ` ${JSON.stringify(r.checked.examples)}` : ''}.`,
    );
  return lines;
};
