// The "indexes" scenario: what secondary indexes cost on the event path, and how fast a query answers.
// One fresh server. Two machines of the same code (TAGGED below): `plain` declares no index, `indexed`
// two (`status`, `tags`) whose values change on every event (one value removed and one written in
// `status`, two and two in `tags`). K instances of each; closed loops of C in flight on one, then the
// other, R rounds alternated (the host is noisy), medians compared. Then Q instances of a third machine
// (`queried`, indexes `owner`, `status`, `tags`) are created with values in their context, and each op
// of the query endpoint is timed, one request at a time, asking for a page of 100 in both directions.
import { join } from 'node:path';
import { StateBackedClient } from '@statebacked/client';
import { authHeaders, makePool, outcomeKey, request } from './http.mjs';
import { startSampler } from './proc-sampler.mjs';
import { summarize } from './stats.mjs';
import { failureText, int } from './markdown-format.mjs';

export const TAGGED = `import { createMachine, assign } from 'npm:xstate';
const step = assign((c) => ({ ...c, n: c.n + 1, status: 'step-' + String((c.n + 1) % 100).padStart(2, '0'), tags: ['t' + ((c.n + 1) % 7), 'u' + ((c.n + 1) % 5)] }));
export default createMachine({ id: 'tagged', initial: 'even', predictableActionArguments: true,
  context: { n: 0, owner: '', status: 'new', tags: [] },
  states: { even: { on: { INC: { target: 'odd', actions: step } } }, odd: { on: { INC: { target: 'even', actions: step } } } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

export const OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'];
const PAGE = 100;

const median = (values) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** C workers taking the next of `total` jobs until done or the time cap: answers/s, latencies, outcomes. */
const closedLoop = async ({ concurrency, total, capS, job }) => {
  const latencies = new Float64Array(total);
  const counts = {};
  let next = 0;
  let done = 0;
  let capped = false;
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(capS) * 1_000_000_000n;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        if (process.hrtime.bigint() > deadline) {
          capped = true;
          return;
        }
        const answer = await job(next++);
        const key = outcomeKey(answer);
        counts[key] = (counts[key] ?? 0) + 1;
        latencies[done++] = answer.ms;
      }
    }),
  );
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  return {
    requests: done,
    wallS: Number(wallS.toFixed(2)),
    perSecond: Number(((counts['200'] ?? 0) / wallS).toFixed(1)),
    statusCounts: counts,
    latencyMs: summarize(latencies.subarray(0, done)),
    cappedByTime: capped,
  };
};

/** The medians of the rounds of one machine, and the ratio of indexed to plain. */
export const compareRounds = (rounds) => {
  const of = (machine, pick) => median(rounds.map((r) => pick(r[machine])));
  const side = (machine) => ({
    perSecond: of(machine, (w) => w?.perSecond),
    p50: of(machine, (w) => w?.latencyMs?.p50),
    p99: of(machine, (w) => w?.latencyMs?.p99),
    cpuUsPerEvent: of(machine, (w) => w?.cpuUsPerEvent),
  });
  const plain = side('plain');
  const indexed = side('indexed');
  const ratio = (a, b) => (a == null || b == null || b === 0 ? null : Number((a / b).toFixed(3)));
  // Each round's two windows ran back to back: their ratio cancels most of the host's drift between rounds.
  const paired = (pick) => {
    const m = median(rounds.map((r) => ratio(pick(r.indexed), pick(r.plain))));
    return m == null ? null : Number(m.toFixed(3));
  };
  return {
    plain,
    indexed,
    throughputRatio: ratio(indexed.perSecond, plain.perSecond),
    p99Ratio: ratio(indexed.p99, plain.p99),
    pairedThroughputRatio: paired((w) => w?.perSecond),
    pairedCpuRatio: paired((w) => w?.cpuUsPerEvent),
  };
};

/** Whether a page is in index order for its direction (UTF-8 bytes of the value, then the slug). */
export const inIndexOrder = (entries, descending) => {
  for (let i = 1; i < entries.length; i++) {
    const a = entries[i - 1];
    const b = entries[i];
    const c = Buffer.compare(Buffer.from(a.indexValue), Buffer.from(b.indexValue)) || (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0);
    if (descending ? c <= 0 : c >= 0) return false;
  }
  return true;
};

const ownerOf = (i) => `user${String((i * 7919) % 1_000_003).padStart(7, '0')}@example.com`;

/**
 * @typedef {{ requests: number, wallS: number, perSecond: number, statusCounts: Record<string, number>, latencyMs: ReturnType<typeof summarize>, cappedByTime: boolean, cpuPct?: number | null, cpuUsPerEvent?: number | null }} IndexesWindow
 * What one run gives: the parts measured before an error, and the error (a failed run lacks the rest).
 * @typedef {{
 *   scenario: any,
 *   rounds?: Array<{ round: number, plain?: IndexesWindow, indexed?: IndexesWindow }>,
 *   events?: ReturnType<typeof compareRounds>,
 *   checked?: { instances: number, mismatches: number, examples: Array<{ instance: string, indexed: unknown[], context: unknown }> },
 *   queryCreate?: IndexesWindow,
 *   queries?: Array<{ index: string, dir: string, op: string, queries: number, meanReturned: number, p50: number | null, p99: number | null, max: number | null }>,
 *   queryOrder?: { misordered: number, examples: string[] },
 *   error?: string,
 *   serverExit?: { code: number | null, signal: string | null },
 *   serverStderrTail?: string,
 *   profileFile?: string,
 * }} IndexesRun
 */

/** @returns {Promise<IndexesRun>} */
export const runIndexes = async (scenario, config, { startServer, repoRoot, log }) => {
  const label = 'indexes';
  const server = await startServer({
    repoRoot,
    adminKey: config.adminKey,
    label,
    profileDir: config.profile ? join(repoRoot, 'bench/results/prof') : undefined,
  });
  log(`${label}: server pid ${server.pid}`);
  /** @type {IndexesRun} */
  const out = { scenario };
  const pool = makePool(server.url, Math.max(scenario.concurrency, 16));
  const headers = authHeaders(config.adminKey);
  const call = async (method, path, body) => {
    const answer = await request(pool, method, path, headers, body);
    if (answer.status < 200 || answer.status > 299) throw new Error(`${method} ${path}: ${answer.status} ${answer.text.slice(0, 300)}`);
    return answer.text ? JSON.parse(answer.text) : undefined;
  };
  try {
    const admin = new StateBackedClient(config.adminKey, { apiHost: server.url });
    // The 0.1.37 client sends neither indexes nor selectors: the machine by hand, the version through its three steps.
    const machine = async (slug, selectors) => {
      await call('POST', '/machines', { slug, indexes: Object.keys(selectors) });
      const provisional = await admin.machineVersions.provisionallyCreate(slug);
      const form = new FormData();
      for (const [key, value] of Object.entries(provisional.codeUploadFields)) form.append(key, value);
      form.set('content-type', 'application/javascript');
      form.append('file', new Blob([TAGGED], { type: 'application/javascript' }), `${slug}.js`);
      const uploaded = await fetch(provisional.codeUploadUrl, { method: 'POST', body: form });
      if (!uploaded.ok) throw new Error(`upload: ${uploaded.status}`);
      await call('PUT', `/machines/${slug}/v/${provisional.machineVersionId}`, { makeCurrent: true, indexSelectors: selectors });
    };
    await machine('plain', {});
    await machine('indexed', { status: '$.status', tags: '$.tags' });
    const k = scenario.instances;
    for (const m of ['plain', 'indexed']) {
      const created = await closedLoop({
        concurrency: 16,
        total: k,
        capS: scenario.capS,
        job: (i) => request(pool, 'POST', `/machines/${m}`, headers, { slug: `k${i}` }),
      });
      if (Object.keys(created.statusCounts).some((key) => key !== '200'))
        throw new Error(`creating ${m}: ${JSON.stringify(created.statusCounts)}`);
      const warm = await closedLoop({
        concurrency: scenario.concurrency,
        total: scenario.warmupEvents,
        capS: scenario.capS,
        job: () => request(pool, 'POST', `/machines/${m}/i/k${(Math.random() * k) | 0}/events`, headers, { event: 'INC' }),
      });
      if (Object.keys(warm.statusCounts).some((key) => key !== '200'))
        throw new Error(`warming ${m}: ${JSON.stringify(warm.statusCounts)}`);
    }
    // Instances in turn: with K ≥ C, no instance has two events in flight (each waits in its mailbox otherwise).
    const window = async (m) => {
      let issued = 0;
      const sampler = startSampler(server.pid, 250);
      const result = await closedLoop({
        concurrency: scenario.concurrency,
        total: scenario.events,
        capS: scenario.capS,
        job: () => request(pool, 'POST', `/machines/${m}/i/k${issued++ % k}/events`, headers, { event: 'INC' }),
      });
      const sampled = sampler.stop();
      result.cpuPct = sampled.cpuPct;
      result.cpuUsPerEvent =
        sampled.cpuPct == null || !result.perSecond ? null : Math.round((sampled.cpuPct / 100 / result.perSecond) * 1e6);
      log(
        `${label}: ${m}: ${result.perSecond} ev/s, p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms, ${JSON.stringify(result.statusCounts)}`,
      );
      return result;
    };
    out.rounds = [];
    for (let round = 1; round <= scenario.rounds; round++) {
      const order = round % 2 === 1 ? ['plain', 'indexed'] : ['indexed', 'plain'];
      const r = { round };
      for (const m of order) r[m] = await window(m);
      out.rounds.push(r);
    }
    out.events = compareRounds(out.rounds);

    // Every indexed instance is in `status` exactly once, with the value its count gives.
    const seen = new Map();
    let cursor;
    do {
      const page = await call('GET', `/machines/indexed/indexes/status/query?limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
      for (const entry of page.instances) seen.set(entry.slug, (seen.get(entry.slug) ?? []).concat(entry.indexValue));
      cursor = page.cursor;
    } while (cursor);
    const wrong = [];
    for (let i = 0; i < k; i++) {
      const { context } = await call('GET', `/machines/indexed/i/k${i}/admin`);
      const values = seen.get(`k${i}`) ?? [];
      if (values.length !== 1 || values[0] !== context.status) wrong.push({ instance: `k${i}`, indexed: values, context: context.status });
    }
    out.checked = { instances: k, mismatches: wrong.length, examples: wrong.slice(0, 3) };

    // Queries over Q instances.
    await machine('queried', { owner: '$.owner', status: '$.status', tags: '$.tags' });
    const q = scenario.queryInstances;
    log(`${label}: creating ${q.toLocaleString('en-US')} instances to query`);
    const created = await closedLoop({
      concurrency: scenario.concurrency,
      total: q,
      capS: scenario.queryCreateCapS,
      job: (i) =>
        request(pool, 'POST', '/machines/queried', headers, {
          slug: `q${i}`,
          context: { owner: ownerOf(i), status: `s${String(i % 100).padStart(2, '0')}`, tags: [`t${i % 7}`, `u${i % 13}`] },
        }),
    });
    out.queryCreate = created;
    if (Object.keys(created.statusCounts).some((key) => key !== '200'))
      throw new Error(`creating queried: ${JSON.stringify(created.statusCounts)}`);
    out.queries = [];
    const misordered = [];
    for (const index of ['owner']) {
      for (const dir of ['asc', 'desc']) {
        for (const op of [undefined, ...OPS]) {
          const latencies = [];
          let returned = 0;
          for (let n = 0; n < scenario.queries; n++) {
            const operand = ownerOf((Math.random() * q) | 0);
            const params = new URLSearchParams({ limit: String(PAGE), dir, ...(op ? { op, value: operand } : {}) });
            const answer = await request(pool, 'GET', `/machines/queried/indexes/${index}/query?${params}`, headers);
            if (answer.status !== 200) throw new Error(`query ${params}: ${answer.status} ${answer.text.slice(0, 300)}`);
            const page = JSON.parse(answer.text).instances;
            if (!inIndexOrder(page, dir === 'desc')) misordered.push(`${index} ${params}`);
            returned += page.length;
            latencies.push(answer.ms);
          }
          const summary = summarize(latencies);
          out.queries.push({
            index,
            dir,
            op: op ?? 'all',
            queries: latencies.length,
            meanReturned: Number((returned / latencies.length).toFixed(1)),
            p50: summary.p50,
            p99: summary.p99,
            max: summary.max,
          });
        }
      }
    }
    out.queryOrder = { misordered: misordered.length, examples: misordered.slice(0, 3) };
    log(`${label}: queries: ${out.queries.map((x) => `${x.op} ${x.dir} p50 ${x.p50} p99 ${x.p99}`).join('; ')}`);
  } catch (err) {
    out.error = String(err?.stack ?? err);
  } finally {
    await pool.close();
    const stopped = await server.stop({ keepData: config.keepData });
    out.serverExit = { code: stopped.code, signal: stopped.signal };
    if (stopped.code !== 0) out.serverStderrTail = stopped.stderrTail;
    // (the whole run: both machines' windows, the creates and the queries)
    if (server.profileFile) out.profileFile = server.profileFile;
  }
  return out;
};

/** Failed: an error, a non-200 in a measured window, an instance whose index entry is not its status, a page out of order. */
export const indexesFailed = (r) =>
  Boolean(r.error) ||
  !r.rounds?.length ||
  r.rounds.some((round) =>
    ['plain', 'indexed'].some((m) => Object.keys(round[m]?.statusCounts ?? { missing: 1 }).some((key) => key !== '200')),
  ) ||
  (r.checked?.mismatches ?? 1) > 0 ||
  (r.queryOrder?.misordered ?? 1) > 0;

export const indexesMarkdown = (r, fmt) => {
  const s = r.scenario;
  const lines = [
    '',
    `### indexes: events with and without two indexes (C=${s.concurrency}, K=${int(s.instances)}, ${int(s.events)} events × ${s.rounds} rounds each), queries over ${int(s.queryInstances)} instances`,
    '',
    'Same machine code; `indexed` has two indexes whose values change on every event (status: 1 removed + 1 written; tags: 2 + 2). Medians of the rounds, alternated.',
    '',
    '| machine | ev/s | p50 | p99 | server CPU µs/event | failed |',
    '|---|---:|---:|---:|---:|---|',
  ];
  for (const m of ['plain', 'indexed']) {
    const e = r.events?.[m] ?? {};
    const failed = (r.rounds ?? []).map((round) => failureText(round[m]?.statusCounts)).join(', ');
    lines.push(`| ${m} | ${int(e.perSecond)} | ${fmt(e.p50)} | ${fmt(e.p99)} | ${int(e.cpuUsPerEvent)} | ${failed} |`);
  }
  if (r.events) {
    lines.push(
      '',
      `indexed ÷ plain: ${fmt(r.events.throughputRatio, 3)} of the events/s (aim ≥ 0.90), p99 × ${fmt(r.events.p99Ratio, 2)}; ` +
        `median of each round's own ratio: events/s × ${fmt(r.events.pairedThroughputRatio, 3)}, server CPU per event × ${fmt(r.events.pairedCpuRatio, 3)}. ` +
        `Index entries checked: ${r.checked?.instances ?? '–'} instances, ${r.checked?.mismatches ?? '–'} mismatches.`,
    );
  }
  if (r.queryCreate) lines.push('', `Query instances: ${int(r.queryCreate.requests)} created at ${int(r.queryCreate.perSecond)}/s.`);
  if (r.queries?.length) {
    lines.push(
      '',
      `Index query latency (ms), one request at a time, limit ${PAGE}, operand a random existing value; ${s.queries} queries per row:`,
      '',
      '| index | dir | op | p50 | p99 | max | mean entries |',
      '|---|---|---|---:|---:|---:|---:|',
    );
    for (const x of r.queries)
      lines.push(`| ${x.index} | ${x.dir} | ${x.op} | ${fmt(x.p50)} | ${fmt(x.p99)} | ${fmt(x.max)} | ${fmt(x.meanReturned, 1)} |`);
  }
  if (r.error) lines.push('', `**indexes failed:** ${r.error}`);
  return lines;
};
