// Benchmark knobs, read from the environment, and the scenario definitions built from them.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CYCLE } from './cart-machine.mjs';
import { parseArms } from './yardstick.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

const int = (name, fallback, min = 1) => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min}, got ${raw}`);
  return value;
};

const flag = (name) => ['1', 'true', 'yes'].includes(String(process.env[name] ?? '').toLowerCase());

export const loadConfig = () => {
  const instances = int('BENCH_INSTANCES', 1000);
  const capS = int('BENCH_TIME_CAP_S', 60);
  // One event cycle per instance on average, so that the measured phase starts on code that has run
  // every transition it takes. With 1,000 (the default until 2026-11-25) the instances had mostly taken
  // one ADD: the measured phase's first second then ran CHECKOUT, CONFIRM and RESET for the first time,
  // at ≈ 60 % of the later rate while V8 compiled them, and that second made ≈ 2–4 ms of the c64 p99.
  const warmupEvents = int('BENCH_WARMUP_EVENTS', instances * CYCLE.length, 0);
  const all = {
    c64: {
      id: 'c64',
      kind: 'closed',
      instances,
      concurrency: int('BENCH_CONCURRENCY', 64),
      events: int('BENCH_EVENTS', 30000),
      warmupEvents,
      capS,
    },
    c1: {
      id: 'c1',
      kind: 'closed',
      instances,
      concurrency: 1,
      events: int('BENCH_C1_EVENTS', 5000),
      // As many as the others: with 300 (the cap until 2026-11-25) the first 2–4 s of the measured
      // phase still ran ≈ 30 % slower, one instance after another getting its first event and the
      // JIT warming up, and the p50 measured that.
      warmupEvents,
      capS,
    },
    open: {
      id: 'open',
      kind: 'open',
      instances,
      rate: int('BENCH_RATE', 3000),
      durationS: int('BENCH_DURATION_S', 10),
      // Connections the open-loop generator may hold; requests beyond them queue in the client, and that
      // queueing counts in the latency because latency runs from the scheduled send time.
      maxConnections: int('BENCH_OPEN_CONNECTIONS', 256),
      warmupEvents,
      capS,
    },
    // Org B at a steady rate, alone and then beside org A's misbehaving code (bench/lib/neighbours.mjs).
    neighbours: {
      id: 'neighbours',
      kind: 'neighbours',
      instances: int('BENCH_NEIGHBOURS_INSTANCES', 50),
      rate: int('BENCH_NEIGHBOURS_RATE', 200),
      durationS: int('BENCH_NEIGHBOURS_DURATION_S', 30),
      // What org A does: spin (to the CPU limit, every second), bomb (past the memory limit, every 10 s).
      noise: (process.env.BENCH_NEIGHBOURS_NOISE || 'spin,bomb').split(','),
      capS,
    },
    // One version, K instances: creates, then events over all of them and over a hot 1 % (bench/lib/instances.mjs).
    instances: {
      id: 'instances',
      kind: 'instances',
      ks: (process.env.BENCH_INSTANCES_KS || '1000,100000,1000000').split(',').map((k) => {
        const value = Number(k);
        if (!Number.isInteger(value) || value < 1) throw new Error(`BENCH_INSTANCES_KS takes positive integers, got ${k}`);
        return value;
      }),
      concurrency: int('BENCH_INSTANCES_CONCURRENCY', 64),
      events: int('BENCH_INSTANCES_EVENTS', 20000),
      // smply: the counter bundled with xstate inside, as users upload; service: xstate resolved by the service
      bundle: (() => {
        const bundle = process.env.BENCH_INSTANCES_BUNDLE || 'smply';
        if (!['smply', 'service'].includes(bundle)) throw new Error(`BENCH_INSTANCES_BUNDLE takes smply or service, got ${bundle}`);
        return bundle;
      })(),
      // Creating 1,000,000 at ≈ 3,000/s takes ≈ 6 minutes; each phase stops at this cap.
      capS: int('BENCH_INSTANCES_CAP_S', 1200),
    },
    // Websocket subscribers (GET /rt) on one server: HTTP events at a steady rate, in windows without and
    // with S subscribers spread over K instances; delivery delay per update (bench/lib/realtime.mjs).
    realtime: {
      id: 'realtime',
      kind: 'realtime',
      subscribers: int('BENCH_RT_SUBSCRIBERS', 1000),
      instances: int('BENCH_RT_INSTANCES', 100),
      rate: int('BENCH_RT_RATE', 500),
      seconds: int('BENCH_RT_SECONDS', 20),
      // Pairs of windows (without, with), alternated because the host is noisy; the report gives medians.
      rounds: int('BENCH_RT_ROUNDS', 2),
      concurrency: int('BENCH_RT_CONCURRENCY', 32),
      processes: int('BENCH_RT_PROCESSES', 1),
      // Distinct tokens (subs) among the subscribers: each is its own allowRead check and topic per update.
      authContexts: int('BENCH_RT_AUTH_CONTEXTS', 1),
      warmupS: int('BENCH_RT_WARMUP_S', 3, 0),
      capS,
    },
    // Embedded vs clusters of N nodes (cluster-1: one nats-server, R1; cluster-N, N ≥ 2: three
    // nats-servers, R3), each started fresh, C=64 and C=1 closed loops (spread round-robin, straight to
    // owners, through a node that does not own the instance); then a SIGKILLed owner on one cluster and
    // how long its instances take to serve again (bench/lib/cluster.mjs). ≈ 6–8 minutes here.
    cluster: {
      id: 'cluster',
      kind: 'cluster',
      deployments: (process.env.BENCH_CLUSTER_DEPLOYMENTS || 'embedded,cluster-1,cluster-3,cluster-5').split(',').map((d) => {
        const id = d.trim();
        if (id !== 'embedded' && !/^cluster-[1-9]$/.test(id))
          throw new Error(`BENCH_CLUSTER_DEPLOYMENTS takes embedded and cluster-N (N = 1…9); got ${id}`);
        return id;
      }),
      // The deployment the failover is measured on (none: skip it).
      failoverOn: process.env.BENCH_CLUSTER_FAILOVER_ON || 'cluster-3',
      instances: int('BENCH_CLUSTER_INSTANCES', 1000),
      concurrency: int('BENCH_CLUSTER_CONCURRENCY', 64),
      events: int('BENCH_CLUSTER_EVENTS', 10000),
      c1Events: int('BENCH_CLUSTER_C1_EVENTS', 500),
      // Every deployment at the same load: an open loop at this rate, spread over the nodes (0: skip).
      // Each one's C=64 loop runs it at its own rate, and CPU per event falls as a process's rate grows
      // (one node: 643 µs at 600 events/s, 158 at 7,000; bench/JOURNAL.md 2026-11-29 13:15): at one rate the
      // CPU per event of the deployments compares the work they do, not how fast each one could go.
      openRate: int('BENCH_CLUSTER_OPEN_RATE', 800, 0),
      openS: int('BENCH_CLUSTER_OPEN_S', 10),
      // Clusters of N ≥ 2 only: the C loop again, each request sent to its instance's owner (0: skip; the
      // capacity model needs it to tell the forwarding hop from the rest).
      directEvents: int('BENCH_CLUSTER_DIRECT_EVENTS', 5000, 0),
      warmupEvents: int('BENCH_CLUSTER_WARMUP_EVENTS', 3000, 0),
      failoverInstances: int('BENCH_CLUSTER_FAILOVER_INSTANCES', 100, 0),
      failoverRate: int('BENCH_CLUSTER_FAILOVER_RATE', 200),
      failoverRetryMs: int('BENCH_CLUSTER_FAILOVER_RETRY_MS', 20),
      failoverTimeoutS: int('BENCH_CLUSTER_FAILOVER_TIMEOUT_S', 30),
      capS: int('BENCH_CLUSTER_CAP_S', 30),
      // After each cluster phase: how long to wait until every node is ready, every partition it holds
      // is ready and its followers have applied what NATS delivered them.
      catchUpS: int('BENCH_CLUSTER_CATCHUP_S', 60),
      // Seconds of sampling each deployment with no load, before the loops (0: skip).
      idleS: int('BENCH_CLUSTER_IDLE_S', 3, 0),
    },
    // The c64 loop on a machine with two indexes against the same machine without, alternated; then
    // index query latency over many instances (bench/lib/indexes.mjs).
    indexes: {
      id: 'indexes',
      kind: 'indexes',
      instances: int('BENCH_IDX_INSTANCES', 1000),
      concurrency: int('BENCH_IDX_CONCURRENCY', 64),
      // c64's 30,000 events per machine, in 4 alternated windows each: this host drifts by more than
      // the difference within a minute, and each round's own ratio cancels most of it.
      events: int('BENCH_IDX_EVENTS', 7500),
      rounds: int('BENCH_IDX_ROUNDS', 4),
      warmupEvents: int('BENCH_IDX_WARMUP_EVENTS', 6000, 0),
      queryInstances: int('BENCH_IDX_QUERY_INSTANCES', 100000),
      queries: int('BENCH_IDX_QUERIES', 200),
      // Creating 100,000 instances takes ≈ 30–60 s here.
      queryCreateCapS: int('BENCH_IDX_CREATE_CAP_S', 600),
      capS,
    },
    // Statehold against the yardstick (../shared/yardstick: fastify + xstate 5 + a PostgreSQL UPSERT per
    // event) in the same run: the same counter, the same closed loops at C=64 and C=1, R rounds alternated
    // (bench/lib/yardstick.mjs).
    yardstick: {
      id: 'yardstick',
      kind: 'yardstick',
      dir: resolve(process.env.BENCH_YARDSTICK_DIR || resolve(repoRoot, '../shared/yardstick')),
      // where start.sh keeps PostgreSQL's data and the service (its own default)
      stateDir: process.env.YARDSTICK_DIR || '/tmp/statehold-yardstick',
      arms: parseArms(process.env.BENCH_YARDSTICK_STATEHOLD || 'statehold='),
      instances: int('BENCH_YARDSTICK_INSTANCES', 1000),
      concurrency: int('BENCH_YARDSTICK_CONCURRENCY', 64),
      events: int('BENCH_YARDSTICK_EVENTS', 20000),
      c1Events: int('BENCH_YARDSTICK_C1_EVENTS', 3000),
      warmupEvents: int('BENCH_YARDSTICK_WARMUP_EVENTS', int('BENCH_YARDSTICK_INSTANCES', 1000) * 3, 0),
      rounds: int('BENCH_YARDSTICK_ROUNDS', 2),
      // the major version of xstate bundled into Statehold's counter (the yardstick runs xstate 5)
      xstate: (() => {
        const major = int('BENCH_YARDSTICK_XSTATE', 5);
        if (major !== 4 && major !== 5) throw new Error(`BENCH_YARDSTICK_XSTATE takes 4 or 5, got ${major}`);
        return major;
      })(),
      stopPostgres: flag('BENCH_YARDSTICK_STOP_PG'),
      capS,
    },
  };
  const wanted = (process.env.BENCH_SCENARIOS || 'c64,c1,open,neighbours,realtime,instances,cluster,indexes,yardstick')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const id of wanted)
    if (!all[id]) throw new Error(`unknown scenario ${id} in BENCH_SCENARIOS (known: ${Object.keys(all).join(', ')})`);
  for (const id of wanted) {
    const s = all[id];
    if (['closed', 'cluster', 'indexes', 'yardstick'].includes(s.kind) && s.instances < s.concurrency) {
      throw new Error(
        `${id}: BENCH_INSTANCES (${s.instances}) must be >= concurrency (${s.concurrency}) so that each worker owns its instances`,
      );
    }
  }
  return {
    scenarios: wanted.map((id) => all[id]),
    profile: flag('BENCH_PROFILE'),
    keepData: flag('BENCH_KEEP_DATA'),
    sampleMs: int('BENCH_SAMPLE_MS', 250),
    adminKey: 'bench-admin-key-' + process.pid,
  };
};
