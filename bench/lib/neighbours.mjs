// The "neighbours" scenario: does one org's misbehaving machine code cost other orgs anything?
// Org B sends events at a steady rate (open loop: latency counts from the scheduled send time) to a small
// counter machine, twice, each on a fresh server: once alone, once while org A, on the same server,
// sends an event that spins until the CPU limit every second and one that allocates past its isolate's
// memory limit every 10 s. The report compares B's latencies between the two runs.
import { StateBackedClient } from '@statebacked/client';
import { authHeaders, makePool, outcomeKey, request, tally } from './http.mjs';
import { summarize } from './stats.mjs';

const QUIET = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'quiet', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  ADD: { actions: assign({ n: (c) => c.n + 1 }) },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const NOISY = `import { createMachine } from 'npm:xstate';
export default createMachine({ id: 'noisy', initial: 'a', predictableActionArguments: true, states: { a: { on: {
  SPIN: { actions: () => { for (;;) {} } },
  BOMB: { actions: () => { new Array(2 ** 28).fill(0); } },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Org A is the server's bootstrap org; org B is made here. Each gets its machine and instances. */
const setup = async ({ url, adminKey, instances }) => {
  const admin = new StateBackedClient(adminKey, { apiHost: url });
  const orgA = (await admin.orgs.list()).orgs[0].id;
  const pool = makePool(url, 4);
  const headers = { ...authHeaders(adminKey) };
  const created = await request(pool, 'POST', '/orgs', headers, { name: 'neighbour-b', allowAnonymousAccess: false });
  if (created.status !== 200) throw new Error(`creating org B: ${created.status} ${created.text}`);
  const orgB = (await admin.orgs.list()).orgs.map((o) => o.id).find((id) => id !== orgA);
  const inOrg = async (orgId, machine, code, count) => {
    const client = new StateBackedClient(adminKey, { apiHost: url, orgId });
    await client.machines.create(machine);
    await client.machineVersions.create(machine, { clientInfo: 'bench', makeCurrent: true, code });
    const orgHeaders = { ...headers, 'x-statebacked-org-id': orgId };
    for (let i = 0; i < count; i++) {
      const answer = await request(pool, 'POST', `/machines/${machine}`, orgHeaders, { slug: `i${i}` });
      if (answer.status !== 200) throw new Error(`creating ${machine}/i${i}: ${answer.status} ${answer.text}`);
    }
    return orgHeaders;
  };
  const bHeaders = await inOrg(orgB, 'quiet', QUIET, instances);
  const aHeaders = await inOrg(orgA, 'noisy', NOISY, 1);
  await pool.close();
  return { aHeaders, bHeaders };
};

/** B's open loop: `rate` events a second for `durationS`, each to the next instance in turn. */
const steadyB = async ({ url, headers, instances, rate, durationS }) => {
  const pool = makePool(url, 64);
  const total = Math.round(rate * durationS);
  const latencies = [];
  /** Per second of the run: B's latencies, to see whether slow answers cluster (around A's bombs?). */
  const bySecond = Array.from({ length: Math.ceil(durationS) }, () => []);
  const counts = {};
  const t0 = performance.now();
  const pending = [];
  for (let k = 0; k < total; k++) {
    const scheduled = t0 + (k * 1000) / rate;
    const wait = scheduled - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(
      request(pool, 'POST', `/machines/quiet/i/i${k % instances}/events`, headers, { event: 'ADD' }).then((answer) => {
        tally(counts, outcomeKey(answer));
        const latency = performance.now() - scheduled;
        latencies.push(latency);
        bySecond[Math.min(bySecond.length - 1, Math.floor((scheduled - t0) / 1000))].push(latency);
      }),
    );
  }
  await Promise.all(pending);
  await pool.close();
  return {
    latencyMs: summarize(latencies),
    // Without the first 2 s: beside org A, they hold its first offence (moved to the quarantine worker).
    afterTwoSecondsMs: summarize(bySecond.slice(2).flat()),
    statusCounts: counts,
    events: total,
    maxBySecond: bySecond.map((values) => Math.round(Math.max(0, ...values))),
  };
};

/** A's misbehaviour until `stop()`: a spin every second, a memory bomb every 10 s (each waits for its answer). */
const noisyA = ({ url, headers, noise }) => {
  const pool = makePool(url, 4);
  const counts = { SPIN: {}, BOMB: {} };
  let stopped = false;
  const every = async (event, periodMs, firstAtMs) => {
    await sleep(firstAtMs);
    while (!stopped) {
      const started = performance.now();
      const answer = await request(pool, 'POST', '/machines/noisy/i/i0/events', headers, { event });
      tally(counts[event], outcomeKey(answer));
      const left = periodMs - (performance.now() - started);
      if (left > 0 && !stopped) await sleep(left);
    }
  };
  const running = Promise.all([
    noise.includes('spin') ? every('SPIN', 1_000, 0) : undefined,
    noise.includes('bomb') ? every('BOMB', 10_000, 500) : undefined,
  ]);
  return {
    stop: async () => {
      stopped = true;
      await running;
      await pool.close();
      return counts;
    },
  };
};

const oneRun = async ({ withA, scenario, config, startServer, repoRoot }) => {
  const label = `${scenario.id}-${withA ? 'with-a' : 'alone'}`;
  const server = await startServer({ repoRoot, adminKey: config.adminKey, label });
  try {
    const { aHeaders, bHeaders } = await setup({ url: server.url, adminKey: config.adminKey, instances: scenario.instances });
    // Warm-up: B's code paths compiled, its instances live.
    await steadyB({ url: server.url, headers: bHeaders, instances: scenario.instances, rate: scenario.rate, durationS: 2 });
    const noisy = withA ? noisyA({ url: server.url, headers: aHeaders, noise: scenario.noise }) : undefined;
    const b = await steadyB({
      url: server.url,
      headers: bHeaders,
      instances: scenario.instances,
      rate: scenario.rate,
      durationS: scenario.durationS,
    });
    const a = noisy ? await noisy.stop() : undefined;
    return { withA, b, ...(a ? { a } : {}) };
  } finally {
    const stopped = await server.stop();
    if (stopped.code !== 0) console.error(`bench: ${label}: server exited ${stopped.code ?? stopped.signal}:\n${stopped.stderrTail}`);
  }
};

export const runNeighbours = async (scenario, config, { startServer, repoRoot, log }) => {
  log(`${scenario.id}: org B alone`);
  const alone = await oneRun({ withA: false, scenario, config, startServer, repoRoot });
  log(`${scenario.id}: org B beside org A`);
  const beside = await oneRun({ withA: true, scenario, config, startServer, repoRoot });
  return { scenario, neighbours: { alone, beside } };
};

/** The report's lines for this scenario. */
export const neighboursMarkdown = (r, fmt) => {
  const { alone, beside } = r.neighbours;
  const row = (run, what) => {
    const l = run.b.latencyMs;
    const later = run.b.afterTwoSecondsMs;
    const bad =
      Object.entries(run.b.statusCounts)
        .filter(([key]) => key !== '200')
        .map(([key, n]) => `${n}× ${key}`)
        .join(', ') || '0';
    return `| ${what} | ${run.b.events} | ${fmt(l.p50)} | ${fmt(l.p90)} | ${fmt(l.p99)} | ${fmt(l.max)} | ${fmt(later.p99)} | ${bad} |`;
  };
  const aText = beside.a
    ? Object.entries(beside.a)
        .map(
          ([event, counts]) =>
            `${event}: ${
              Object.entries(counts)
                .map(([key, n]) => `${n}× ${key}`)
                .join(', ') || 'none sent'
            }`,
        )
        .join('; ')
    : '–';
  return [
    '',
    `Neighbours \`${r.scenario.id}\`: org B at ${r.scenario.rate} events/s for ${r.scenario.durationS} s over ${r.scenario.instances} instances (open loop, latency from the scheduled time), alone and beside org A, whose code spins to the CPU limit every second and allocates past its memory limit every 10 s, on a fresh server each. Org A's answers: ${aText}.`,
    '',
    '| org B | events | p50 | p90 | p99 | max | p99 after 2 s | non-200 |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    row(alone, 'alone'),
    row(beside, 'beside org A'),
    '',
    `Org B's slowest answer in each second, alone: ${alone.b.maxBySecond.join(' ')}; beside org A: ${beside.b.maxBySecond.join(' ')} (ms).`,
  ];
};
