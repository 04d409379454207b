// The "cluster" scenario: the same closed loops on three deployments started fresh one after another on
// this host (embedded `statehold serve`; a 1-node cluster on one nats-server, R1; a 3-node cluster on
// three nats-servers, R3), then a failover on the 3-node cluster. Each deployment: the cart machine
// uploaded, K instances created, a warm-up, then C=64 and C=1 closed loops (cluster-3: requests spread
// round-robin over the three nodes, as a load balancer would; and a C=64 loop sent straight to each
// instance's owner, which separates the forwarding hop's cost for the capacity model), the CPU of every
// node (with its sandbox workers) and every nats-server sampled from /proc, and every instance's history
// verified. Failover: under a light steady load through the two nodes that stay, the node owning the
// most of ~100 probed instances is SIGKILLed; each of its instances is sent its next event every ~20 ms
// through the survivors until one is answered 200, and the time from the kill to that answer is the
// instance's failover time. Every process it started is stopped at the end, and checked to be gone.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServers, natsServerAvailable } from '../../cluster/nats-servers.mjs';
import { MACHINE_NAME } from './cart-machine.mjs';
import { runClosedLoop } from './closed-loop.mjs';
import { authHeaders, makePool, outcomeKey, request, tally } from './http.mjs';
import { InstanceBook } from './instance-book.mjs';
import { family, startSampler } from './proc-sampler.mjs';
import { serverNodeArgs } from './server-process.mjs';
import { setupMachine } from './setup-machine.mjs';
import { round, summarize } from './stats.mjs';
import { verifyScenario } from './verify.mjs';
import { failureText, int } from './markdown-format.mjs';

const CREATE_CONCURRENCY = 16;
const NODE_START_MS = 60_000;
const NODE_STOP_MS = 20_000;
/** The cluster's defaults (src/bin/node-config.ts): a silent node leaves every view after 250 ms × 4. */
export const DEFAULT_HEARTBEAT = { heartbeatMs: 250, missedHeartbeats: 4 };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

export const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err?.code === 'EPERM';
  }
};

// ---------------------------------------------------------------------------------------------------
// Pure helpers (test/bench-cluster.test.ts)

/**
 * One dispatcher over several undici Pools, as a load balancer: each request to the next pool in turn.
 * What bench/lib/http.mjs's request() calls (`dispatch`), so the closed loop and the instance book use it
 * as they use one pool.
 */
export const roundRobin = (pools) => {
  let next = 0;
  return {
    pools,
    dispatch(options, handler) {
      const pool = pools[next];
      next = (next + 1) % pools.length;
      return pool.dispatch(options, handler);
    },
    close: () => Promise.all(pools.map((pool) => pool.close())),
  };
};

/**
 * A dispatcher that sends each request about an instance (`/machines/<m>/i/<slug>/…`) to the pool of
 * the node that owns it (`ownerIndex(slug)`, a number or undefined), as an owner-aware client would;
 * other requests (and instances of unknown owner) go round-robin.
 */
export const ownerRouted = (pools, ownerIndex) => {
  const fallback = roundRobin(pools);
  return {
    pools,
    dispatch(options, handler) {
      const match = /^\/machines\/[^/]+\/i\/([^/?]+)/.exec(options.path ?? '');
      const index = match ? ownerIndex(decodeURIComponent(match[1])) : undefined;
      return index === undefined ? fallback.dispatch(options, handler) : pools[index].dispatch(options, handler);
    },
    close: () => Promise.all(pools.map((pool) => pool.close())),
  };
};

/** The node that owns the most of the probed instances (`owners`: instance → node id), ties to the first seen. */
export const pickVictim = (owners) => {
  const counts = {};
  for (const owner of Object.values(owners)) counts[owner] = (counts[owner] ?? 0) + 1;
  let victim;
  for (const [id, n] of Object.entries(counts)) if (victim === undefined || n > counts[victim]) victim = id;
  return { victim, counts, instances: Object.keys(owners).filter((name) => owners[name] === victim) };
};

/**
 * CPU per acknowledged event (µs) from per-process samples: `groups` maps a role (nodes, nats, server)
 * to [{ id, sample }] with the sampler's summary (cpuPct: 100 = one core; cpuSplitPct: main thread,
 * the node's other threads, its sandbox workers). Returns per role its total and each process's, and
 * for node roles the split summed over the processes.
 * @template {string} Role
 * @param {Record<Role, Array<{ id: string, sample?: { cpuPct?: number | null, cpuSplitPct?: { main?: number, nodeOther?: number, worker?: number } } }>>} groups
 * @param {number} eventsPerSecond
 * @returns {Record<Role, { totalUs: number | null, cpuPct: number | null, perProcessUs: Record<string, number | null>, splitUs?: { main: number | null, nodeOther: number | null, worker: number | null } }>}
 */
export const cpuPerEvent = (groups, eventsPerSecond) => {
  const us = (pct) => (pct == null || !eventsPerSecond ? null : round((pct / 100 / eventsPerSecond) * 1e6, 1));
  const out = {};
  for (const [role, members] of Object.entries(groups)) {
    const perProcess = {};
    let total = 0;
    const split = { main: 0, nodeOther: 0, worker: 0 };
    let hasSplit = false;
    for (const { id, sample } of members) {
      if (!sample || sample.cpuPct == null) continue;
      total += sample.cpuPct;
      perProcess[id] = us(sample.cpuPct);
      const s = sample.cpuSplitPct;
      if (s && s.main != null) {
        hasSplit = true;
        for (const key of Object.keys(split)) split[key] += s[key] ?? 0;
      }
    }
    out[role] = {
      totalUs: members.length ? us(total) : null,
      cpuPct: round(total, 1),
      perProcessUs: perProcess,
      ...(hasSplit ? { splitUs: { main: us(split.main), nodeOther: us(split.nodeOther), worker: us(split.worker) } } : {}),
    };
  }
  return out;
};

/**
 * A capacity model from the measured CPU per event (µs), for N statehold nodes on hosts of their own
 * (`coresPerHost` each) and three nats-servers (R3) on hosts of their own. Per event, cluster-wide:
 *   node CPU(N) = exec + (N − 1) × apply + (N − 1) / N × forward
 * exec: running the event on its owner (HTTP, sandbox, the append, its own local apply; the owner's
 * follower meets its own commit again and skips it); apply: another node applying that commit from the
 * TX stream to its LMDB copy (every node follows every commit); forward: the extra cost of a request
 * that arrives at a node that does not own its instance (both ends of the NATS hop). With the 1-node
 * cluster (c1 = exec), the 3-node cluster with requests sent straight to owners (direct = exec + 2
 * apply) and spread round-robin (spread = direct + 2/3 forward):
 *   exec = c1, apply = (direct − c1) / 2, forward = (spread − direct) × 3 / 2.
 * NATS: the busiest nats-server's CPU per event (the TX stream's leader) bounds the cluster at
 * coresPerHost / that, before the fan-out to more followers grows it. Negative parts (noise on a shared
 * host) are clamped to 0 and said so. Undefined unless c1Us, directUs and spreadUs are all measured (> 0).
 * @param {{ c1Us?: number | null, directUs?: number | null, spreadUs?: number | null, natsBusiestUs?: number | null }} measured
 * @param {{ nodes?: number[], coresPerHost?: number }} [options]
 */
export const capacityModel = ({ c1Us, directUs, spreadUs, natsBusiestUs }, { nodes = [1, 3, 5, 9], coresPerHost = 2 } = {}) => {
  if (![c1Us, directUs, spreadUs].every((x) => typeof x === 'number' && x > 0)) return undefined;
  const clamped = [];
  const clamp = (name, x) => {
    if (x >= 0) return x;
    clamped.push(name);
    return 0;
  };
  const exec = c1Us;
  const apply = clamp('apply', (directUs - c1Us) / 2);
  const forward = clamp('forward', ((spreadUs - directUs) * 3) / 2);
  const natsLimit = natsBusiestUs > 0 ? (coresPerHost * 1e6) / natsBusiestUs : null;
  const projection = nodes.map((n) => {
    const perEventUs = exec + (n - 1) * apply + ((n - 1) / n) * forward;
    const nodesLimit = (n * coresPerHost * 1e6) / perEventUs;
    return {
      nodes: n,
      clusterNodeUsPerEvent: round(perEventUs, 1),
      perNodeUsPerEvent: round(perEventUs / n, 1),
      nodesLimitPerSecond: Math.round(nodesLimit),
      limitPerSecond: Math.round(natsLimit === null ? nodesLimit : Math.min(nodesLimit, natsLimit)),
      boundBy: natsLimit !== null && natsLimit < nodesLimit ? 'nats' : 'nodes',
    };
  });
  return {
    coresPerHost,
    execUs: round(exec, 1),
    applyUs: round(apply, 1),
    forwardUs: round(forward, 1),
    natsBusiestUs: natsBusiestUs ?? null,
    natsLimitPerSecond: natsLimit === null ? null : Math.round(natsLimit),
    // With N → ∞ every node spends `apply` on (almost) every event: the cluster's ceiling is coresPerHost / apply.
    applyCeilingPerSecond: apply > 0 ? Math.round((coresPerHost * 1e6) / apply) : null,
    clamped,
    projection,
  };
};

/** Failover times (ms) of the victim's instances, and how many never came back. */
export const failoverFigures = (times, expected) => ({
  instances: expected,
  served: times.length,
  notServed: expected - times.length,
  ms: summarize(times),
});

// ---------------------------------------------------------------------------------------------------
// Processes

/** Samples every given process (with its descendants) while `fn` runs; returns fn's result and the samples. */
const sampled = async (processes, sampleMs, fn) => {
  const samplers = processes.map((p) => ({ ...p, sampler: startSampler(p.pid, sampleMs) }));
  const cpu0 = process.cpuUsage();
  const t0 = monoMs();
  const result = await fn();
  const wallS = (monoMs() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const samples = samplers.map(({ sampler, ...p }) => {
    const { samples: _series, ...summary } = sampler.stop();
    return { ...p, sample: summary };
  });
  return { result, samples, generatorCpuPct: round(((cpu.user + cpu.system) / 1e6 / wallS) * 100, 1) };
};

/** Starts one `statehold node`; resolves once it listens and GET /health answers 200. */
const startClusterNode = async ({ repoRoot, id, natsUrls, replicas, dataDir, adminKey, masterKey, track }) => {
  mkdirSync(dataDir, { recursive: true });
  const args = [
    ...serverNodeArgs(repoRoot),
    join(repoRoot, 'dist/bin/statehold.js'),
    'node',
    '--nats',
    natsUrls.join(','),
    '--node-id',
    id,
    '--replicas',
    String(replicas),
    '--port',
    '0',
    '--data-dir',
    dataDir,
    '--admin-key',
    adminKey,
  ];
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { ...process.env, STATEHOLD_MASTER_KEY: masterKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child.pid, `node ${id}`);
  let tail = '';
  const keep = (chunk) => (tail = (tail + chunk.toString()).slice(-8_000));
  child.stderr.on('data', keep);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`node ${id} did not listen within ${NODE_START_MS} ms:\n${tail}`)), NODE_START_MS);
    const onData = (chunk) => {
      out += chunk.toString();
      keep(chunk);
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve(match[1]);
      }
    };
    child.stdout.on('data', onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`node ${id} exited during start (code ${code}, signal ${signal}):\n${tail}`));
    });
  });
  const deadline = Date.now() + NODE_START_MS;
  for (;;) {
    const answer = await fetch(`${url}/health`).catch(() => undefined);
    if (answer?.ok) break;
    if (Date.now() > deadline) throw new Error(`node ${id} at ${url} not healthy within ${NODE_START_MS} ms`);
    await sleep(100);
  }
  return {
    id,
    url,
    pid: child.pid,
    dataDir,
    exited,
    tail: () => tail,
    /** SIGTERM (or the given signal), SIGKILL after NODE_STOP_MS. */
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), NODE_STOP_MS);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
};

const getJson = async (url, path, token) => {
  const answer = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  if (!answer.ok) throw new Error(`GET ${url}${path}: ${answer.status} ${await answer.text()}`);
  return answer.json();
};

/** Waits until every node sees `count` members and has applied the META log as far as the first. */
const waitConverged = async (nodes, adminKey, count, ms = 30_000) => {
  const deadline = Date.now() + ms;
  for (;;) {
    const views = await Promise.all(nodes.map((node) => getJson(node.url, '/cluster', adminKey).catch(() => undefined)));
    const target = Math.max(...views.map((v) => v?.appliedSeq?.meta ?? 0));
    if (views.every((v) => v && v.members.length === count && v.appliedSeq.meta >= target)) return views;
    if (Date.now() > deadline)
      throw new Error(
        `cluster did not converge on ${count} members in ${ms} ms: ${JSON.stringify(views.map((v) => v && { members: v.members.length, meta: v.appliedSeq?.meta }))}`,
      );
    await sleep(100);
  }
};

/**
 * How far the nodes' copies are behind the TX stream, from the nats-servers' monitoring (/jsz): the
 * stream's last sequence, and each follower's consumer (every node follows the stream with an ordered
 * consumer) with what it was delivered and what is still pending on the server (the client holds a
 * batch of up to ≈ 100 more, delivered but not yet applied). Each node's appliedSeq.tx (GET /cluster)
 * beside it.
 */
const txProgress = async (deployment, adminKey) => {
  let lastSeq = 0;
  const consumers = new Map();
  for (const server of deployment.nats) {
    const jsz = await fetch(`http://127.0.0.1:${server.httpPort}/jsz?accounts=true&streams=true&consumers=true`)
      .then((r) => r.json())
      .catch(() => undefined);
    for (const account of jsz?.account_details ?? []) {
      for (const stream of account.stream_detail ?? []) {
        if (!stream.name.endsWith('_TX')) continue;
        lastSeq = Math.max(lastSeq, stream.state?.last_seq ?? 0);
        for (const c of stream.consumer_detail ?? []) {
          const seen = consumers.get(c.name);
          const delivered = c.delivered?.stream_seq ?? 0;
          if (!seen || delivered > seen.delivered) consumers.set(c.name, { delivered, pending: c.num_pending ?? 0 });
        }
      }
    }
  }
  const live = deployment.nodes.filter((n) => !n.killed);
  const views = await Promise.all(
    live.map((n) =>
      getJson(n.url, '/cluster', adminKey)
        .then((v) => [n.id, v.appliedSeq?.tx ?? 0])
        .catch(() => [n.id, null]),
    ),
  );
  // A killed node's consumer stays on the server, stuck, until NATS drops it: the live nodes' are the
  // most advanced ones.
  const list = [...consumers.values()].sort((a, b) => b.delivered - a.delivered).slice(0, live.length);
  return {
    lastSeq,
    followers: list.length,
    consumers: consumers.size,
    maxPending: Math.max(0, ...list.map((c) => Math.max(c.pending, lastSeq - c.delivered))),
    applied: Object.fromEntries(views),
  };
};

/** Waits until every follower has been delivered the whole TX stream and every node applied it. */
const waitCaughtUp = async (deployment, adminKey, timeoutMs) => {
  const t0 = monoMs();
  const first = await txProgress(deployment, adminKey);
  let now = first;
  const live = deployment.nodes.filter((n) => !n.killed).length;
  while (!(
    now.followers >= live &&
    now.maxPending === 0 &&
    Object.values(now.applied).every((seq) => seq !== null && seq >= now.lastSeq)
  )) {
    if (monoMs() - t0 > timeoutMs) return { atStart: first, end: now, caughtUpS: null, timedOut: true };
    await sleep(50);
    now = await txProgress(deployment, adminKey);
  }
  return {
    atStart: { lastSeq: first.lastSeq, maxPending: first.maxPending, applied: first.applied },
    caughtUpS: round((monoMs() - t0) / 1000, 2),
    timedOut: false,
  };
};

/** Starts a deployment: `embedded`, or `cluster-<n>` (n nats-servers, n nodes, R n). */
const startDeployment = async (kind, { repoRoot, root, config, deps, track, log }) => {
  if (kind === 'embedded') {
    const server = await deps.startServer({ repoRoot, adminKey: config.adminKey, label: 'cluster-embedded' });
    track(server.pid, 'embedded server');
    return {
      kind,
      nodes: [{ id: 'embedded', url: server.url, pid: server.pid }],
      nats: [],
      async stop() {
        const stopped = await server.stop({ keepData: config.keepData });
        return {
          nodes: [
            {
              id: 'embedded',
              code: stopped.code,
              signal: stopped.signal,
              ...(stopped.code !== 0 ? { stderrTail: stopped.stderrTail } : {}),
            },
          ],
        };
      },
    };
  }
  const count = Number(/^cluster-(\d+)$/.exec(kind)?.[1]);
  if (count !== 1 && count !== 3) throw new Error(`unknown deployment ${kind} (embedded, cluster-1, cluster-3)`);
  const dir = join(root, kind);
  const nats = await startNatsServers({ count, dir: join(dir, 'nats'), keep: true, log: (line) => log(`${kind}: ${line}`) });
  for (const server of nats.servers) track(server.process.pid, `nats-server ${server.name}`);
  const masterKey = randomBytes(32).toString('base64');
  const nodes = [];
  const stopAll = async () => {
    const out = { nodes: [], nats: [] };
    for (const node of nodes) {
      const stopped = await node.stop();
      out.nodes.push({
        id: node.id,
        code: stopped.code,
        signal: stopped.signal,
        ...(stopped.code !== 0 && !node.killed ? { stderrTail: node.tail().slice(-2000) } : {}),
      });
    }
    await nats.stop();
    out.nats = nats.servers.map((server) => ({ name: server.name, code: server.process.exitCode, signal: server.process.signalCode }));
    return out;
  };
  try {
    for (let i = 1; i <= count; i++) {
      const node = await startClusterNode({
        repoRoot,
        id: `node-${i}`,
        natsUrls: nats.urls,
        replicas: count,
        dataDir: join(dir, `node-${i}`),
        adminKey: config.adminKey,
        masterKey,
        track,
      });
      nodes.push(node);
      log(`${kind}: node-${i} pid ${node.pid} at ${node.url}`);
    }
    await waitConverged(nodes, config.adminKey, count);
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
  return {
    kind,
    nodes,
    nats: nats.servers.map((server) => ({ id: server.name, pid: server.process.pid, httpPort: server.httpPort })),
    stop: stopAll,
  };
};

// ---------------------------------------------------------------------------------------------------
// Phases

const processesOf = (deployment, except) => ({
  nodes: deployment.nodes.filter((n) => n.id !== except).map((n) => ({ id: n.id, pid: n.pid })),
  nats: deployment.nats.map((n) => ({ id: n.id, pid: n.pid })),
});

/**
 * A measured closed loop with every node's and nats-server's CPU sampled. On a cluster the sampling
 * goes on after the loop until every node's copy has applied the whole TX stream (`catchUp`): the
 * CPU per event then includes the followers' work, and `appliedPerSecond` is the rate at which events
 * were acknowledged *and* applied on every node (the rate the cluster can keep up).
 */
const measuredLoop = async ({ deployment, dispatcher, book, concurrency, events, capS, sampleMs, adminKey, catchUpS }) => {
  const procs = processesOf(deployment);
  const all = [...procs.nodes.map((p) => ({ ...p, role: 'nodes' })), ...procs.nats.map((p) => ({ ...p, role: 'nats' }))];
  const clustered = deployment.nats.length > 0;
  let catchUp;
  const { result, samples, generatorCpuPct } = await sampled(all, sampleMs, async () => {
    const loop = await runClosedLoop({ book, pool: dispatcher, concurrency, events, capS });
    if (clustered) catchUp = await waitCaughtUp(deployment, adminKey, catchUpS * 1000);
    return loop;
  });
  const groups = { nodes: [], nats: [] };
  for (const s of samples) groups[s.role].push({ id: s.id, sample: s.sample });
  const { overTime, ...figures } = result;
  const sampledS = samples[0]?.sample.wallS ?? result.wallS;
  return {
    ...figures,
    afterFirstSecond: overTime?.afterFirstSecond,
    ...(catchUp
      ? { catchUp, appliedPerSecond: catchUp.timedOut ? null : round(result.acked / (result.wallS + catchUp.caughtUpS), 1) }
      : {}),
    sampledS,
    generatorCpuPct,
    hostBusyCores: samples[0]?.sample.hostBusyCores ?? null,
    // CPU over the sampled window (the loop and, on a cluster, the catch-up) ÷ the events acknowledged.
    cpu: cpuPerEvent(groups, result.acked / sampledS),
    rssPeakMb: Object.fromEntries(samples.map((s) => [s.id, s.sample.rssPeakMb])),
  };
};

const createInstances = async (book, dispatcher, machine) => {
  const counts = {};
  const latencies = [];
  let next = 0;
  const t0 = monoMs();
  await Promise.all(
    Array.from({ length: CREATE_CONCURRENCY }, async () => {
      while (next < book.count) {
        const i = next++;
        const answer = await request(dispatcher, 'POST', `/machines/${machine}`, book.headers, book.createBody(i));
        tally(counts, outcomeKey(answer));
        latencies.push(answer.ms);
      }
    }),
  );
  const wallS = (monoMs() - t0) / 1000;
  return {
    instances: book.count,
    wallS: round(wallS),
    perSecond: round(book.count / wallS, 1),
    statusCounts: counts,
    latencyMs: summarize(latencies),
  };
};

/** Owner node id of each named instance, asked of one node. */
const ownersOf = async (url, adminKey, orgId, slugs) => {
  const owners = {};
  const pool = makePool(url, 8);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < slugs.length) {
        const slug = slugs[next++];
        const answer = await request(pool, 'GET', `/cluster?instance=${orgId}/${MACHINE_NAME}/${slug}`, authHeaders(adminKey));
        if (answer.status !== 200) throw new Error(`GET /cluster for ${slug}: ${answer.status} ${answer.text.slice(0, 200)}`);
        owners[slug] = JSON.parse(answer.text).instance.owner;
      }
    }),
  );
  await pool.close();
  return owners;
};

/**
 * A light steady load: W workers, each sending its instances' next events at rate / W per second
 * (waiting for each answer: a slow answer delays that worker's next event). Returns a stop() that
 * resolves with every answer's arrival time (monotonic ms), latency and outcome.
 */
const steadyLoad = ({ book, dispatcher, indices, rate, workers = 8 }) => {
  const answers = [];
  let stopping = false;
  const intervalMs = (1000 * workers) / rate;
  const counts = {};
  const run = async (w) => {
    const owned = indices.filter((_, k) => k % workers === w);
    let due = monoMs() + (w * intervalMs) / workers;
    while (!stopping) {
      const wait = due - monoMs();
      if (wait > 0) await sleep(wait);
      if (stopping) break;
      const i = owned[(Math.random() * owned.length) | 0];
      const one = {};
      const { ok, ms } = await book.sendNext(dispatcher, i, one);
      const key = Object.keys(one)[0];
      tally(counts, key);
      answers.push({ at: monoMs(), ms, ok, key });
      due = Math.max(due + intervalMs, monoMs() - intervalMs);
    }
  };
  const running = Promise.all(Array.from({ length: workers }, (_, w) => run(w)));
  return {
    async stop() {
      stopping = true;
      await running;
      return { answers, counts };
    },
  };
};

/** Figures of the steady load's answers that arrived in [from, to) (monotonic ms). */
const steadyFigures = (answers, from, to) => {
  const inside = answers.filter((a) => a.at >= from && a.at < to);
  const counts = {};
  for (const a of inside) tally(counts, a.key);
  const seconds = (to - from) / 1000;
  return {
    answers: inside.length,
    perSecond: seconds > 0 ? round(inside.filter((a) => a.ok).length / seconds, 1) : null,
    statusCounts: counts,
    latencyMs: summarize(inside.map((a) => a.ms)),
  };
};

const runFailover = async ({ deployment, book, headers, scenario, config, log }) => {
  const adminKey = config.adminKey;
  const first = deployment.nodes[0];
  const orgId = (await getJson(first.url, '/orgs', adminKey)).orgs[0].id;
  const probeCount = Math.min(scenario.failoverInstances, book.count - 1);
  const probed = Array.from({ length: probeCount }, (_, i) => book.slug(i));
  const owners = await ownersOf(first.url, adminKey, orgId, probed);
  const { victim, counts: ownedBy, instances } = pickVictim(owners);
  const victimNode = deployment.nodes.find((n) => n.id === victim);
  const survivors = deployment.nodes.filter((n) => n.id !== victim);
  log(
    `cluster-3: failover: ${victim} (pid ${victimNode.pid}) owns ${instances.length} of ${probeCount} probed instances (${JSON.stringify(ownedBy)})`,
  );
  const survivorPools = roundRobin(survivors.map((n) => makePool(n.url, 16)));
  const probeIndex = instances.map((slug) => Number(slug.slice(slug.lastIndexOf('-') + 1)));
  const others = Array.from({ length: book.count - probeCount }, (_, k) => probeCount + k);
  const out = {
    victim,
    victimPid: victimNode.pid,
    probed: probeCount,
    ownedBy,
    heartbeat: DEFAULT_HEARTBEAT,
    rate: scenario.failoverRate,
    retryMs: scenario.failoverRetryMs,
  };
  try {
    out.beforeLoad = await waitCaughtUp(deployment, adminKey, scenario.catchUpS * 1000);
    const loadStartedAt = monoMs();
    const load = steadyLoad({ book, dispatcher: survivorPools, indices: others, rate: scenario.failoverRate });
    await sleep(2_000);
    // Each of the victim's instances gets an event just before the kill, so it is live on the victim.
    const touched = {};
    for (const i of probeIndex) await book.sendNext(survivorPools, i, touched);
    out.touchedBeforeKill = touched;
    const victimFamily = family(victimNode.pid);
    const procs = processesOf(deployment, victim);
    const all = [...procs.nodes.map((p) => ({ ...p, role: 'nodes' })), ...procs.nats.map((p) => ({ ...p, role: 'nats' }))];
    out.lagAtKill = await txProgress(deployment, adminKey);
    const probeCounts = {};
    let killedAt;
    const { result: times, samples } = await sampled(all, config.sampleMs, async () => {
      killedAt = monoMs();
      victimNode.killed = true;
      process.kill(victimNode.pid, 'SIGKILL');
      const deadline = killedAt + scenario.failoverTimeoutS * 1000;
      const served = [];
      await Promise.all(
        probeIndex.map(async (i) => {
          while (monoMs() < deadline) {
            const { ok } = await book.sendNext(survivorPools, i, probeCounts);
            if (ok) {
              served.push(monoMs() - killedAt);
              return;
            }
            await sleep(scenario.failoverRetryMs);
          }
        }),
      );
      return served;
    });
    const lastServedAt = killedAt + Math.max(0, ...times);
    await sleep(1_000);
    const steady = await load.stop();
    const endedAt = monoMs();
    out.failover = failoverFigures(times, probeIndex.length);
    out.probeStatusCounts = probeCounts;
    out.probeFailedRequests = Object.entries(probeCounts)
      .filter(([key]) => key !== '200')
      .reduce((sum, [, n]) => sum + n, 0);
    out.steady = {
      beforeKill: steadyFigures(steady.answers, loadStartedAt, killedAt),
      duringFailover: steadyFigures(steady.answers, killedAt, lastServedAt + 1),
      afterFailover: steadyFigures(steady.answers, lastServedAt + 1, endedAt),
      statusCounts: steady.counts,
    };
    out.failedDuringFailover =
      out.probeFailedRequests +
      Object.entries(out.steady.duringFailover.statusCounts)
        .filter(([key]) => key !== '200')
        .reduce((sum, [, n]) => sum + n, 0);
    out.survivorCpuPct = Object.fromEntries(samples.map((s) => [s.id, s.sample.cpuPct]));
    out.victimExit = await victimNode.exited;
    // The victim's sandbox workers: gone with it, or left behind?
    await sleep(500);
    out.victimDescendantsLeft = victimFamily.slice(1).filter(alive);
    const view = await getJson(survivors[0].url, '/cluster', adminKey);
    out.membersAfter = view.members.map((m) => m.id ?? m);
    log(
      `cluster-3: failover: ${out.failover.served}/${out.failover.instances} served again, p50 ${out.failover.ms.p50} ms, p99 ${out.failover.ms.p99} ms, max ${out.failover.ms.max} ms; failed requests meanwhile ${out.failedDuringFailover} (${JSON.stringify(probeCounts)})`,
    );
  } finally {
    await survivorPools.close();
  }
  return { out, verifyUrl: survivors[0].url };
};

/** One deployment, start to stop: setup, creates, warm-up, the closed loops, verification (and failover on cluster-3). */
const runDeployment = async (kind, scenario, config, ctx) => {
  const { log } = ctx;
  const t0 = Date.now();
  const out = { kind };
  let deployment;
  try {
    deployment = await startDeployment(kind, ctx);
    out.startS = round((Date.now() - t0) / 1000, 1);
    out.nodes = deployment.nodes.map((n) => ({ id: n.id, pid: n.pid, url: n.url }));
    out.nats = deployment.nats.map(({ id, pid }) => ({ id, pid }));
    const urls = deployment.nodes.map((n) => n.url);
    const { token } = await setupMachine({ url: urls[0], adminKey: config.adminKey, machine: MACHINE_NAME });
    if (deployment.nodes.length > 1) await waitConverged(deployment.nodes, config.adminKey, deployment.nodes.length);
    const headers = authHeaders(token);
    const prefix = `${kind}-i`;
    const book = new InstanceBook({ machine: MACHINE_NAME, prefix, count: scenario.instances, headers });
    const spread = roundRobin(urls.map((url) => makePool(url, scenario.concurrency)));
    try {
      log(`${kind}: creating ${scenario.instances} instances`);
      out.create = await createInstances(book, spread, MACHINE_NAME);
      if ((out.create.statusCounts['200'] ?? 0) !== book.count)
        throw new Error(`instance creation failed: ${JSON.stringify(out.create.statusCounts)}`);
      log(`${kind}: warm-up, ${scenario.warmupEvents} events at C=${scenario.concurrency}`);
      const warm = await runClosedLoop({
        book,
        pool: spread,
        concurrency: scenario.concurrency,
        events: scenario.warmupEvents,
        capS: scenario.capS,
        record: false,
      });
      out.warmup = { throughput: warm.throughput, statusCounts: warm.statusCounts };
      if (deployment.nats.length) out.warmup.catchUp = await waitCaughtUp(deployment, config.adminKey, scenario.catchUpS * 1000);
      const loop = (concurrency, events, dispatcher = spread) =>
        measuredLoop({
          deployment,
          dispatcher,
          book,
          concurrency,
          events,
          capS: scenario.capS,
          sampleMs: config.sampleMs,
          adminKey: config.adminKey,
          catchUpS: scenario.catchUpS,
        });
      if (scenario.idleS > 0) {
        // What the deployment burns with no load at all (heartbeats, consumers, timers): the floor under C=1's CPU per event.
        const procs = processesOf(deployment);
        const { samples } = await sampled([...procs.nodes, ...procs.nats], config.sampleMs, () => sleep(scenario.idleS * 1000));
        out.idleCpuPct = Object.fromEntries(samples.map((x) => [x.id, x.sample.cpuPct]));
      }
      out.c64 = await loop(scenario.concurrency, scenario.events);
      log(
        `${kind}: C=${scenario.concurrency}: ${out.c64.throughput} ev/s, p50 ${out.c64.latencyMs.p50}, p99 ${out.c64.latencyMs.p99} ms, ${JSON.stringify(out.c64.statusCounts)}`,
      );
      out.c1 = await loop(1, scenario.c1Events);
      log(
        `${kind}: C=1: ${out.c1.throughput} ev/s, p50 ${out.c1.latencyMs.p50}, p99 ${out.c1.latencyMs.p99} ms, ${JSON.stringify(out.c1.statusCounts)}`,
      );
      if (deployment.nodes.length > 1 && scenario.directEvents > 0) {
        // The same C=64 loop with every request sent to its instance's owner: no forwarding hop.
        const orgId = (await getJson(urls[0], '/orgs', config.adminKey)).orgs[0].id;
        const owners = await ownersOf(
          urls[0],
          config.adminKey,
          orgId,
          Array.from({ length: book.count }, (_, i) => book.slug(i)),
        );
        const indexOf = Object.fromEntries(deployment.nodes.map((n, k) => [n.id, k]));
        const direct = ownerRouted(
          urls.map((url) => makePool(url, scenario.concurrency)),
          (slug) => indexOf[owners[slug]],
        );
        try {
          out.direct = await loop(scenario.concurrency, scenario.directEvents, direct);
        } finally {
          await direct.close();
        }
        log(
          `${kind}: C=${scenario.concurrency} straight to owners: ${out.direct.throughput} ev/s, p50 ${out.direct.latencyMs.p50}, p99 ${out.direct.latencyMs.p99} ms`,
        );
      }
    } finally {
      await spread.close();
    }
    let verifyUrl = urls[0];
    if (kind === 'cluster-3' && scenario.failoverInstances > 0) {
      const failover = await runFailover({ deployment, book, headers, scenario, config, log });
      out.failover = failover.out;
      verifyUrl = failover.verifyUrl;
    }
    if (deployment.nats.length) out.beforeVerify = await waitCaughtUp(deployment, config.adminKey, scenario.catchUpS * 1000);
    out.stateMismatches = book.stateMismatches;
    out.stateMismatchExamples = book.stateMismatchExamples;
    log(`${kind}: verifying ${book.count} histories`);
    out.verify = await verifyScenario({ url: verifyUrl, adminKey: config.adminKey, machine: MACHINE_NAME, prefix, log: book.log });
  } catch (err) {
    out.error = String(err?.stack ?? err);
    log(`${kind}: error: ${err?.message ?? err}`);
  } finally {
    if (deployment) out.stopped = await deployment.stop().catch((err) => ({ error: String(err) }));
    out.wallS = round((Date.now() - t0) / 1000, 1);
  }
  return out;
};

// ---------------------------------------------------------------------------------------------------

export const runCluster = async (scenario, config, deps) => {
  const { repoRoot, log } = deps;
  const wanted = scenario.deployments.filter((d) => d !== 'embedded');
  if (wanted.length > 0 && !natsServerAvailable()) throw new Error('nats-server is not installed (apt-get install nats-server)');
  const root = mkdtempSync(join(tmpdir(), 'statehold-bench-cluster-'));
  const started = new Map(); // pid → what
  const track = (pid, what) => started.set(pid, what);
  const result = { scenario, deployments: [] };
  try {
    for (const kind of scenario.deployments) {
      log(`cluster: ${kind}: starting`);
      result.deployments.push(await runDeployment(kind, scenario, config, { repoRoot, root, config, deps, track, log }));
    }
  } finally {
    // Nothing may outlive the scenario: every process it started (and their descendants, if any were
    // orphaned), SIGKILLed if still there, then checked.
    const leftover = [...started.keys()].filter(alive);
    for (const pid of leftover) {
      for (const child of family(pid).reverse()) {
        try {
          process.kill(child, 'SIGKILL');
        } catch {}
      }
    }
    await sleep(leftover.length ? 500 : 0);
    const stillRunning = [...started.keys()].filter(alive);
    result.processes = { started: started.size, leftRunningAtEnd: leftover.map((pid) => `${pid} (${started.get(pid)})`), stillRunning };
    if (!config.keepData) rmSync(root, { recursive: true, force: true });
    else result.dataDir = root;
  }
  return result;
};

/** Errors, histories that do not match, answers in a steady-state phase that were not 200, instances never served again, or processes left running. */
export const clusterFailed = (r) => {
  if (r.error || !r.deployments?.length) return true;
  if (r.processes?.stillRunning?.length || r.processes?.leftRunningAtEnd?.length) return true;
  return r.deployments.some(
    (d) =>
      d.error ||
      !d.verify?.ok ||
      d.stateMismatches > 0 ||
      ['create', 'c64', 'c1', 'direct'].some(
        (phase) => d[phase] && Object.keys(d[phase].statusCounts ?? {}).some((key) => key !== '200'),
      ) ||
      (d.failover && d.failover.failover?.notServed !== 0),
  );
};

// ---------------------------------------------------------------------------------------------------
// Report

export const clusterMarkdown = (r, fmt) => {
  const catchUpText = (p) => {
    if (!p.catchUp) return '–';
    if (p.catchUp.timedOut) return `**not caught up** (${int(p.catchUp.end?.maxPending)} pending after ${r.scenario.catchUpS} s)`;
    return `${int(p.appliedPerSecond)} (${fmt(p.catchUp.caughtUpS)} s, ${int(p.catchUp.atStart?.maxPending)})`;
  };
  const failures = failureText;
  const s = r.scenario;
  const lines = [
    '',
    `### cluster: embedded vs 1-node (R1) vs 3-node (R3) on this host (K=${int(s.instances)}, C=${s.concurrency}: ${int(s.events)} events, C=1: ${int(s.c1Events)} events, after ${int(s.warmupEvents)} warm-up events)`,
    '',
    'Each deployment fresh, everything on this host (nodes, nats-servers, the load in the bench process). cluster-3: requests round-robin over the three nodes ("spread"), and a C=64 loop sent straight to each instance\'s owner ("owners"). CPU µs per acked event: every node with its sandbox workers (main thread / other threads / sandbox workers), and every nats-server.',
    '',
    '| deployment | load | acked ev/s | p50 | p99 | max | non-200 | applied on every node: ev/s (catch-up s, pending at end) | node CPU µs/ev (main / other / worker) | NATS CPU µs/ev | host busy cores | bench CPU % | verified |',
    '|---|---|---:|---:|---:|---:|---|---|---|---:|---:|---:|---|',
  ];
  for (const d of r.deployments ?? []) {
    const verified = d.error
      ? '**error**'
      : d.verify
        ? d.verify.ok
          ? `ok (${int(d.verify.historyEvents)} ev)`
          : `**${d.verify.mismatches} mismatches**`
        : '–';
    for (const [name, p] of [
      [`C=${s.concurrency}${d.kind === 'cluster-3' ? ' spread' : ''}`, d.c64],
      [`C=${s.concurrency} owners`, d.direct],
      ['C=1', d.c1],
    ]) {
      if (!p) continue;
      const n = p.cpu?.nodes ?? {};
      const split = n.splitUs ? ` (${fmt(n.splitUs.main, 0)} / ${fmt(n.splitUs.nodeOther, 0)} / ${fmt(n.splitUs.worker, 0)})` : '';
      lines.push(
        `| ${d.kind} | ${name} | ${int(p.throughput)} | ${fmt(p.latencyMs?.p50)} | ${fmt(p.latencyMs?.p99)} | ${fmt(p.latencyMs?.max)} | ${failures(p.statusCounts)}${p.cappedByTime ? ' (time cap)' : ''} | ${catchUpText(p)} | ` +
          `${fmt(n.totalUs, 0)}${split} | ${d.kind === 'embedded' ? '–' : fmt(p.cpu?.nats?.totalUs, 0)} | ${fmt(p.hostBusyCores)} | ${fmt(p.generatorCpuPct, 0)} | ${verified} |`,
      );
    }
    if (d.create)
      lines.push(
        `| ${d.kind} | create (16 in flight) | ${int(d.create.perSecond)} | ${fmt(d.create.latencyMs.p50)} | ${fmt(d.create.latencyMs.p99)} | ${fmt(d.create.latencyMs.max)} | ${failures(d.create.statusCounts)} | | | | | | |`,
      );
    if (d.error) lines.push('', `**${d.kind} failed:** ${d.error}`, '');
    if (d.verify && !d.verify.ok) lines.push('', `**${d.kind} verification:** ${JSON.stringify(d.verify.examples.slice(0, 3))}`, '');
    if (d.stateMismatches)
      lines.push('', `**${d.kind}: ${d.stateMismatches} answers had an unexpected state:** ${JSON.stringify(d.stateMismatchExamples)}`, '');
  }
  const idle = (r.deployments ?? []).filter((d) => d.idleCpuPct);
  if (idle.length)
    lines.push(
      '',
      `Idle CPU (% of a core, ${s.idleS} s without requests, after the warm-up): ${idle
        .map(
          (d) =>
            `${d.kind}: ${Object.entries(d.idleCpuPct)
              .map(([id, pct]) => `${id} ${fmt(pct, 1)}`)
              .join(', ')}`,
        )
        .join('; ')}.`,
    );
  const c3 = r.deployments?.find((d) => d.kind === 'cluster-3');
  const natsPer = c3?.c64?.cpu?.nats?.perProcessUs;
  if (natsPer)
    lines.push(
      '',
      `cluster-3 at C=${s.concurrency} spread, CPU µs per event by process: ${[...Object.entries(c3.c64.cpu.nodes.perProcessUs), ...Object.entries(natsPer)].map(([id, us]) => `${id} ${fmt(us, 0)}`).join(', ')}.`,
    );
  const f = c3?.failover;
  if (f?.failover) {
    const ms = f.failover.ms;
    lines.push(
      '',
      `Failover (cluster-3, heartbeat ${f.heartbeat.heartbeatMs} ms × ${f.heartbeat.missedHeartbeats}, the defaults): ${f.victim} owned ${f.failover.instances} of ${f.probed} probed instances (${JSON.stringify(f.ownedBy)}) and was SIGKILLed under a steady ${f.rate} events/s through the other two; ` +
        `each of its instances re-sent its next event every ${f.retryMs} ms until answered 200. From the kill to that answer: p50 ${fmt(ms.p50, 0)} ms, p99 ${fmt(ms.p99, 0)} ms, max ${fmt(ms.max, 0)} ms (min ${fmt(ms.min, 0)}); ` +
        `${f.failover.served} of ${f.failover.instances} served again. Failed requests meanwhile: ${int(f.failedDuringFailover)} (probes: ${failures(f.probeStatusCounts)}; steady load: ${failures(f.steady.duringFailover.statusCounts)}). ` +
        `Steady load before the kill p99 ${fmt(f.steady.beforeKill.latencyMs.p99)} ms, during the failover max ${fmt(f.steady.duringFailover.latencyMs.max, 0)} ms, after it p99 ${fmt(f.steady.afterFailover.latencyMs.p99)} ms. ` +
        `Followers' lag at the kill: ${int(f.lagAtKill?.maxPending)} TX entries. Members after: ${(f.membersAfter ?? []).join(', ')}; the victim's sandbox workers left running: ${f.victimDescendantsLeft?.length ?? '–'}.`,
    );
  }
  const aims = [];
  if (c3?.c64)
    aims.push(
      `3-node R3 at C=${s.concurrency}: ${int(c3.c64.throughput)} durable events/s (aim ≥ 2,000: ${c3.c64.throughput >= 2000 ? 'met' : '**not met**'})`,
    );
  if (f?.failover?.ms?.p99 != null)
    aims.push(
      `failover p99 ${fmt(f.failover.ms.p99, 0)} ms (aim < 3,000: ${f.failover.ms.p99 < 3000 && f.failover.notServed === 0 ? 'met' : '**not met**'})`,
    );
  if (aims.length) lines.push('', `Aims (printed, not asserted): ${aims.join('; ')}.`);
  const model = capacityOf(r);
  if (model) {
    lines.push(
      '',
      `Capacity model (measured CPU per event; nodes and nats-servers on hosts of their own with ${model.coresPerHost} cores each): exec ${fmt(model.execUs, 0)} µs on the owner, apply ${fmt(model.applyUs, 0)} µs on every other node, forward ${fmt(model.forwardUs, 0)} µs per forwarded request; the busiest nats-server ${fmt(model.natsBusiestUs, 0)} µs/event (bound ${int(model.natsLimitPerSecond)}/s)${model.clamped.length ? `; clamped to 0 (noise): ${model.clamped.join(', ')}` : ''}. ` +
        `Projected: ${model.projection.map((p) => `N=${p.nodes}: ${int(p.perNodeUsPerEvent)} µs per event per node, ≈ ${int(p.limitPerSecond)}/s (${p.boundBy})`).join('; ')}; ceiling from apply alone ${int(model.applyCeilingPerSecond)}/s.`,
    );
  }
  if (r.processes)
    lines.push(
      '',
      `Processes started: ${r.processes.started}; running at the end before the final kill: ${r.processes.leftRunningAtEnd.length ? r.processes.leftRunningAtEnd.join(', ') : 'none'}; still running after it: ${r.processes.stillRunning.length || 'none'}.`,
    );
  if (r.error) lines.push('', `**cluster failed:** ${r.error}`);
  return lines;
};

/** The capacity model from a run's figures (C=64 loops of cluster-1 and of cluster-3, spread and straight to owners). */
export const capacityOf = (r, options) => {
  const c1 = r.deployments?.find((d) => d.kind === 'cluster-1');
  const c3 = r.deployments?.find((d) => d.kind === 'cluster-3');
  if (!c1?.c64 || !c3?.c64 || !c3?.direct) return undefined;
  const natsPer = Object.values(c3.c64.cpu?.nats?.perProcessUs ?? {}).filter((x) => typeof x === 'number');
  return capacityModel(
    {
      c1Us: c1.c64.cpu?.nodes?.totalUs,
      directUs: c3.direct.cpu?.nodes?.totalUs,
      spreadUs: c3.c64.cpu?.nodes?.totalUs,
      natsBusiestUs: natsPer.length ? Math.max(...natsPer) : undefined,
    },
    options,
  );
};
