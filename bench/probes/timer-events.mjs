// What an event costs when it changes the instance's pending timers (a session whose every event
// re-enters the state with the `after`: the usual inactivity timeout), against one that does not (the
// same machine's NOTE event, which keeps the timer), through HTTP as an application's backend sends
// them (a token signed with a production key; the bench's undici pool), one event at a time (C=1:
// each latency is the request's own) and 64 in flight. Until 2026-11-26 a commit that
// changed timers went to LMDB's own synced transaction instead of the write-ahead log.
//
//   node --no-node-snapshot bench/probes/timer-events.mjs [REPO_DIR,REPO_DIR,...] [ROUNDS]
//
// Each REPO_DIR is a built checkout (default: this one); with several, their servers are run in
// turn, round after round, on this host at the same time of day (old and new builds: `git worktree
// add`, with node_modules linked and `make build` run there). TIMER_EVENTS_N instances (default 200),
// TIMER_EVENTS_C1 sequential and TIMER_EVENTS_C64 concurrent events per kind (defaults 400 and 4,000);
// TIMER_EVENTS_KINDS picks kinds (default `TOUCH,NOTE,NOTE plain`); TIMER_EVENTS_WARMUP events per kind
// at C=64 (and a tenth at C=1) before measuring (default 2,000).
// Prints medians over rounds and writes bench/results/timer-events-<time>.json.
import { StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { authHeaders, makePool, request } from '../lib/http.mjs';
import { alternatingRounds, writeProbeReport } from '../lib/probe-report.mjs';
import { summarize } from '../lib/stats.mjs';
import { startServer } from '../lib/server-process.mjs';

const here = fileURLToPath(new URL('../..', import.meta.url));
const repos = (process.argv[2] ?? here).split(',').map((dir) => resolve(dir));
const ROUNDS = Number(process.argv[3] ?? 2);
const N = Number(process.env.TIMER_EVENTS_N ?? 200);
const C1 = Number(process.env.TIMER_EVENTS_C1 ?? 400);
const C64 = Number(process.env.TIMER_EVENTS_C64 ?? 4_000);
const CAP_MS = 60_000;
const WARMUP = Number(process.env.TIMER_EVENTS_WARMUP ?? 2_000);

const SESSION = `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'session', predictableActionArguments: true, initial: 'active', context: { touches: 0, notes: 0 },
  states: {
    active: {
      after: { 3600000: 'expired' },
      on: {
        TOUCH: { target: 'active', actions: assign({ touches: (c) => c.touches + 1 }) },
        NOTE: { actions: assign({ notes: (c) => c.notes + 1 }) },
      },
    },
    expired: {},
  } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

// The same events on a machine with no timer at all, for reference.
const PLAIN = SESSION.replace("after: { 3600000: 'expired' },", '');

/** What is measured: each event type on its machine ('NOTE plain': NOTE on the machine without a timer). */
const ALL_KINDS = [
  ['TOUCH', 'session'],
  ['NOTE', 'session'],
  ['NOTE plain', 'plain'],
];
/** TIMER_EVENTS_KINDS=TOUCH,NOTE measures only those (e.g. to profile one). */
const KINDS = process.env.TIMER_EVENTS_KINDS
  ? process.env.TIMER_EVENTS_KINDS.split(',')
      .map((kind) => ALL_KINDS.find(([k]) => k === kind))
      .filter(Boolean)
  : ALL_KINDS;

const median = (xs) => summarize(xs).p50;

/** `count` events of `type` over the instances, `concurrency` in flight, each instance one at a time. */
const drive = async (pool, headers, names, type, count, concurrency, machine = 'session') => {
  const latencies = [];
  let next = 0;
  const started = performance.now();
  const worker = async (w) => {
    // Worker w owns the instances i ≡ w (mod concurrency): no instance has two events in flight.
    const own = names.filter((_, i) => i % concurrency === w);
    for (let k = 0; ; k++) {
      if (next >= count || performance.now() - started > CAP_MS) return;
      next++;
      const name = own[k % own.length];
      const t0 = performance.now();
      const answer = await request(pool, 'POST', `/machines/${machine}/i/${name}/events`, headers, { event: type });
      if (answer.status !== 200) throw new Error(`${type} to ${name}: ${answer.status} ${answer.error ?? answer.text}`);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const wallS = (performance.now() - started) / 1000;
  const { p50, p99 } = summarize(latencies);
  return { events: latencies.length, perS: Math.round(latencies.length / wallS), p50, p99 };
};

const runOnce = async (repoRoot, round) => {
  const adminKey = `bench-timer-events-${Date.now()}`;
  const server = await startServer({ repoRoot, adminKey, label: `timer-events-${round}` });
  try {
    const client = new StateBackedClient(adminKey, { apiHost: server.url });
    for (const [machine, code] of [
      ['session', SESSION],
      ['plain', PLAIN],
    ]) {
      await client.machines.create(machine);
      await client.machineVersions.create(machine, { clientInfo: 'bench', makeCurrent: true, code });
    }
    const key = await client.keys.create({ name: 'bench', use: 'production' });
    const token = await signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: 'bench' }, { expires: { in: '2h' } });
    const headers = authHeaders(token);
    const pool = makePool(server.url, 64);
    const names = Array.from({ length: N }, (_, i) => `s${i}`);
    for (const machine of ['session', 'plain']) {
      for (let i = 0; i < N; i += 16) {
        await Promise.all(
          names.slice(i, i + 16).map(async (slug) => {
            const answer = await request(pool, 'POST', `/machines/${machine}`, headers, { slug });
            if (answer.status !== 200) throw new Error(`create ${slug}: ${answer.status} ${answer.error ?? answer.text}`);
          }),
        );
      }
    }
    // Warm-up: every kind of event, both loops (what is measured first was ≈ 40 % slower with one event per instance).
    for (const [type, machine] of KINDS) {
      await drive(pool, headers, names, type.split(' ')[0], WARMUP, 64, machine);
      await drive(pool, headers, names, type.split(' ')[0], WARMUP / 10, 1, machine);
    }
    const figures = {};
    // Each round starts with another kind, so that none is always measured first.
    for (const [kind, machine] of [...KINDS.slice(round % KINDS.length), ...KINDS.slice(0, round % KINDS.length)]) {
      const type = kind.split(' ')[0];
      figures[kind] = {
        c1: await drive(pool, headers, names, type, C1, 1, machine),
        c64: await drive(pool, headers, names, type, C64, 64, machine),
      };
    }
    const sample = await client.machineInstances.get('session', names[0]);
    if (sample.state !== 'active') throw new Error(`unexpected state ${JSON.stringify(sample.state)}`);
    await pool.close();
    return figures;
  } finally {
    await server.stop();
  }
};

const runs = await alternatingRounds(repos, ROUNDS, runOnce);

const medians = {};
for (const [repo, list] of Object.entries(runs)) {
  medians[repo] = {};
  for (const [type] of KINDS) {
    medians[repo][type] = {};
    for (const loop of ['c1', 'c64']) {
      medians[repo][type][loop] = Object.fromEntries(['perS', 'p50', 'p99'].map((f) => [f, median(list.map((r) => r[type][loop][f]))]));
    }
  }
}
console.log('\nmedians (TOUCH changes the pending timer, NOTE does not; NOTE plain: a machine without timers):');
for (const [repo, byType] of Object.entries(medians)) {
  for (const [type, byLoop] of Object.entries(byType)) {
    console.log(
      `${repo} ${type}: c1 p50 ${byLoop.c1.p50} ms p99 ${byLoop.c1.p99} ms (${byLoop.c1.perS}/s); c64 ${byLoop.c64.perS}/s p50 ${byLoop.c64.p50} p99 ${byLoop.c64.p99} ms`,
    );
  }
}
const file = writeProbeReport('timer-events', {
  at: new Date().toISOString(),
  n: N,
  c1Events: C1,
  c64Events: C64,
  rounds: ROUNDS,
  runs,
  medians,
});
console.log(`written to ${file}`);
