// The "cluster" scenario: the same closed loops on deployments started fresh one after another on this
// host (embedded `statehold serve`; cluster-1: one node on one nats-server, R1; cluster-N: N nodes on
// three nats-servers, R3), then a failover on one cluster (cluster-3 by default). Each deployment: the
// cart machine uploaded, K instances created, a warm-up, then C=64 and C=1 closed loops (on clusters of
// 2 or more: spread round-robin over the nodes, as a load balancer would; sent straight to each
// instance's owner, which separates the forwarding hop's cost for the capacity model; and at C=1 through
// the node after each owner, the latency of a forwarded request), the CPU of every node (with its sandbox
// workers) and every nats-server sampled from /proc, and every instance's history verified. Each node
// holds only the partitions it owns: after a phase the sampling goes on until every node says it is
// ready and every partition it holds is applied as far as NATS delivered it. Failover: under a light
// steady load through the nodes that stay, the node owning the most of ~100 probed instances is
// SIGKILLed; each of its instances is sent its next event every ~20 ms through the survivors until one
// is answered 200, and the time from the kill to that answer is the instance's failover time. Every
// process it started is stopped at the end, and checked to be gone.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServers, natsServerAvailable } from '../../cluster/nats-servers.mjs';
import { MACHINE_NAME } from './cart-machine.mjs';
import { runClosedLoop } from './closed-loop.mjs';
import { runOpenLoop } from './open-loop.mjs';
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

/** The node that receives a request about an instance "through a node that does not own it": the next one after its owner. */
export const nonOwnerIndex = (ownerIndex, nodes) => (ownerIndex === undefined || nodes < 2 ? undefined : (ownerIndex + 1) % nodes);

/** The partition a TX-stream consumer follows, from its filter subject (`statehold.<cluster>.tx.<p>.>`); undefined for any other. */
export const partitionOfFilter = (filter) => {
  const match = /\.tx\.(\d+)\.>$/.exec(filter ?? '');
  return match ? Number(match[1]) : undefined;
};

/**
 * Whether a partitioned cluster has caught up after a phase, from each live node's GET /cluster
 * (`views`: [{ id, view }], view undefined when the node did not answer) and the TX stream's consumers
 * as the nats-servers' /jsz lists them (`consumers`: [{ filter, delivered, pending }], one follower per
 * held partition): every node answered and says it is `ready` (not joining, not draining), every
 * partition is held by some node, every held partition is ready, and NATS has nothing more to deliver
 * to its most advanced follower. `behind`: entries delivered but not under the partition's applied
 * watermark yet, summed over the held partitions (reported); `pendingOnServer`: entries NATS still
 * holds for them.
 */
export const clusterProgress = (views, consumers = []) => {
  const lead = new Map(); // partition → its most advanced follower
  for (const c of consumers) {
    const partition = partitionOfFilter(c.filter);
    if (partition === undefined) continue;
    const seen = lead.get(partition);
    if (!seen || c.delivered > seen.delivered) lead.set(partition, { delivered: c.delivered ?? 0, pending: c.pending ?? 0 });
  }
  let count = 0;
  let notReady = 0;
  let behind = 0;
  let unanswered = 0;
  const covered = new Set();
  const states = {};
  const heldInstances = {};
  const heldPartitions = {};
  for (const { id, view } of views) {
    if (!view) {
      unanswered++;
      states[id] = null;
      continue;
    }
    states[id] = view.state ?? null;
    heldInstances[id] = view.heldInstances ?? null;
    const held = view.partitions?.held ?? [];
    heldPartitions[id] = held.length;
    count = Math.max(count, view.partitions?.count ?? 0);
    for (const h of held) {
      covered.add(h.partition);
      if (!h.ready) notReady++;
      const l = lead.get(h.partition);
      if (l) behind += Math.max(0, l.delivered - (h.appliedSeq ?? 0));
    }
  }
  let uncovered = 0;
  for (let p = 0; p < count; p++) if (!covered.has(p)) uncovered++;
  const pendingOnServer = [...lead.values()].reduce((sum, l) => sum + l.pending, 0);
  // (`behind` is reported, not waited for: on 8c773d0 a partition's watermark can stay below entries its
  // follower was delivered until the partition's next write; see bench/JOURNAL.md 2026-11-28 12:18)
  const caughtUp =
    views.length > 0 &&
    unanswered === 0 &&
    Object.values(states).every((state) => state === 'ready') &&
    count > 0 &&
    uncovered === 0 &&
    notReady === 0 &&
    pendingOnServer === 0;
  return {
    caughtUp,
    states,
    partitions: count,
    uncovered,
    notReady,
    behind,
    pendingOnServer,
    lag: behind + pendingOnServer,
    followers: lead.size,
    heldPartitions,
    heldInstances,
  };
};

/**
 * A capacity model from measured CPU per event (µs), for nodes and nats-servers on hosts of their own
 * (`coresPerHost` each). One embedded node: coresPerHost / its CPU per event. A cluster of N nodes with
 * requests spread by a balancer: the busiest node saturates first (coresPerHost / its µs per event,
 * counting every event the cluster acked), and the busiest nats-server (the TX stream's leader) bounds
 * it too; "even" is what N nodes would take if the work were divided exactly (N × coresPerHost / the
 * nodes' total). Projected to other N from the largest cluster measured with both loops: per event,
 * cluster-wide node CPU = exec + (N − 1) / N × forward (each node holds only its partitions: nobody
 * else applies a commit), exec = the loop straight to owners, forward = (spread − owners) × N / (N − 1)
 * (both ends of the hop, for the share of requests a balancer sends to a non-owner). Negative forward
 * (noise) is clamped to 0 and said so.
 * @param {{ embeddedUs?: number | null, clusters: Array<{ kind: string, nodes: number, spreadNodeUs: Record<string, number | null>, natsUs?: Record<string, number | null>, ownersNodeTotalUs?: number | null }> }} measured
 * @param {{ coresPerHost?: number, projectTo?: number[] }} [options]
 */
export const capacityModel = ({ embeddedUs, clusters }, { coresPerHost = 2, projectTo = [3, 5, 9, 15] } = {}) => {
  const perSecond = (us, n = 1) => (typeof us === 'number' && us > 0 ? (n * coresPerHost * 1e6) / us : null);
  const embeddedLimit = perSecond(embeddedUs);
  const ratio = (x) => (x === null || embeddedLimit === null ? null : round(x / embeddedLimit, 2));
  const numbers = (record) => Object.values(record ?? {}).filter((x) => typeof x === 'number');
  const sum = (xs) => xs.reduce((a, b) => a + b, 0);
  const rows = clusters.map((c) => {
    const nodeUs = numbers(c.spreadNodeUs);
    const natsUs = numbers(c.natsUs);
    const nodesTotalUs = nodeUs.length ? sum(nodeUs) : null;
    const busiestNodeUs = nodeUs.length ? Math.max(...nodeUs) : null;
    const natsBusiestUs = natsUs.length ? Math.max(...natsUs) : null;
    const nodesLimit = perSecond(busiestNodeUs);
    const evenLimit = perSecond(nodesTotalUs, c.nodes);
    const natsLimit = perSecond(natsBusiestUs);
    const limit = nodesLimit === null ? null : natsLimit === null ? nodesLimit : Math.min(nodesLimit, natsLimit);
    return {
      kind: c.kind,
      nodes: c.nodes,
      nodesTotalUs: nodesTotalUs === null ? null : round(nodesTotalUs, 1),
      perNodeUs: nodesTotalUs === null ? null : round(nodesTotalUs / c.nodes, 1),
      busiestNodeUs,
      natsTotalUs: natsUs.length ? round(sum(natsUs), 1) : null,
      natsBusiestUs,
      clusterWideUs: nodesTotalUs === null ? null : round(nodesTotalUs + sum(natsUs), 1),
      cpuVsEmbedded: nodesTotalUs === null || !(embeddedUs > 0) ? null : round((nodesTotalUs + sum(natsUs)) / embeddedUs, 2),
      limitPerSecond: limit === null ? null : Math.round(limit),
      evenLimitPerSecond: evenLimit === null ? null : Math.round(evenLimit),
      natsLimitPerSecond: natsLimit === null ? null : Math.round(natsLimit),
      boundBy: limit === null ? null : natsLimit !== null && natsLimit < nodesLimit ? 'nats' : 'nodes',
      vsEmbedded: ratio(limit),
    };
  });
  const base = [...clusters]
    .filter((c) => c.nodes >= 2 && c.ownersNodeTotalUs > 0 && numbers(c.spreadNodeUs).length)
    .sort((a, b) => b.nodes - a.nodes)[0];
  let projection;
  if (base) {
    const row = rows.find((x) => x.kind === base.kind);
    const clamped = [];
    let forward = ((row.nodesTotalUs - base.ownersNodeTotalUs) * base.nodes) / (base.nodes - 1);
    if (forward < 0) {
      clamped.push('forward');
      forward = 0;
    }
    const exec = base.ownersNodeTotalUs;
    const natsLimit = row.natsLimitPerSecond;
    projection = {
      from: base.kind,
      execUs: round(exec, 1),
      forwardUs: round(forward, 1),
      natsLimitPerSecond: natsLimit,
      clamped,
      rows: projectTo.map((n) => {
        const us = exec + ((n - 1) / n) * forward;
        const nodesLimit = perSecond(us, n);
        const limit = natsLimit === null ? nodesLimit : Math.min(nodesLimit, natsLimit);
        return {
          nodes: n,
          clusterNodeUsPerEvent: round(us, 1),
          perNodeUsPerEvent: round(us / n, 1),
          limitPerSecond: Math.round(limit),
          boundBy: natsLimit !== null && natsLimit < nodesLimit ? 'nats' : 'nodes',
          vsEmbedded: ratio(limit),
        };
      }),
    };
  }
  return {
    coresPerHost,
    embeddedUs: embeddedUs ?? null,
    embeddedLimitPerSecond: embeddedLimit === null ? null : Math.round(embeddedLimit),
    rows,
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
 * The TX stream's consumers as the nats-servers' monitoring (/jsz) lists them: one follower per partition a
 * node holds (its filter names the partition), with the stream sequence it was delivered last and what
 * the server still holds for it. A consumer is listed by the servers that host it: the most advanced
 * listing of each is kept.
 */
const txConsumers = async (deployment) => {
  const byName = new Map();
  for (const server of deployment.nats) {
    // (config=true: a consumer's filter subject is in its config, which /jsz leaves out otherwise)
    const jsz = await fetch(`http://127.0.0.1:${server.httpPort}/jsz?accounts=true&streams=true&consumers=true&config=true`)
      .then((r) => r.json())
      .catch(() => undefined);
    for (const account of jsz?.account_details ?? []) {
      for (const stream of account.stream_detail ?? []) {
        if (!stream.name.endsWith('_TX')) continue;
        for (const c of stream.consumer_detail ?? []) {
          const delivered = c.delivered?.stream_seq ?? 0;
          const seen = byName.get(c.name);
          const filter = c.config?.filter_subject ?? c.config?.filter_subjects?.[0];
          if (!seen || delivered > seen.delivered) byName.set(c.name, { filter, delivered, pending: c.num_pending ?? 0 });
        }
      }
    }
  }
  return [...byName.values()];
};

/**
 * The nats-servers' message and byte counters (/varz, summed over the servers; a message a server takes
 * from a route counts there too), or undefined when a server does not answer.
 */
const natsTraffic = async (deployment) => {
  const sum = { inMsgs: 0, outMsgs: 0, inBytes: 0, outBytes: 0 };
  for (const server of deployment.nats) {
    const varz = await fetch(`http://127.0.0.1:${server.httpPort}/varz`)
      .then((r) => r.json())
      .catch(() => undefined);
    if (!varz) return undefined;
    sum.inMsgs += varz.in_msgs;
    sum.outMsgs += varz.out_msgs;
    sum.inBytes += varz.in_bytes;
    sum.outBytes += varz.out_bytes;
  }
  return sum;
};

/** Per acked event, what the nats-servers took in and sent out between two natsTraffic readings. */
export const trafficPerEvent = (before, after, acked) => {
  if (!before || !after || !(acked > 0)) return undefined;
  const per = (key) => round((after[key] - before[key]) / acked, 1);
  return { inMsgs: per('inMsgs'), outMsgs: per('outMsgs'), inBytes: per('inBytes'), outBytes: per('outBytes') };
};

/** Each live node's GET /cluster, and the TX consumers: clusterProgress of them. */
const progressOf = async (deployment, adminKey) => {
  const live = deployment.nodes.filter((n) => !n.killed);
  const views = await Promise.all(
    live.map((n) =>
      getJson(n.url, '/cluster', adminKey)
        .then((view) => ({ id: n.id, view }))
        .catch(() => ({ id: n.id, view: undefined })),
    ),
  );
  return clusterProgress(views, await txConsumers(deployment));
};

/**
 * Waits until every live node is ready and every partition is held, ready and delivered whole by NATS
 * to its follower (clusterProgress). Reads are answered by owners, so this is not needed for a correct
 * read; it makes a phase's CPU include the followers' work on its entries, and the next phase start on
 * a settled cluster.
 */
const waitCaughtUp = async (deployment, adminKey, timeoutMs) => {
  const t0 = monoMs();
  const first = await progressOf(deployment, adminKey);
  let now = first;
  while (!now.caughtUp) {
    if (monoMs() - t0 > timeoutMs) return { atStart: first, end: now, caughtUpS: null, timedOut: true };
    // (not faster: /jsz with every consumer's config costs the nats-servers CPU, counted in the phase)
    await sleep(250);
    now = await progressOf(deployment, adminKey);
  }
  return {
    atStart: { lag: first.lag, notReady: first.notReady, uncovered: first.uncovered, states: first.states },
    // entries delivered to followers but not under their partitions' applied watermark when caught up
    watermarkBehind: now.behind,
    heldPartitions: now.heldPartitions,
    heldInstances: now.heldInstances,
    followers: now.followers,
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
  if (!(count >= 1)) throw new Error(`unknown deployment ${kind} (embedded, cluster-N)`);
  const dir = join(root, kind);
  // One nats-server and R1 for a 1-node cluster; three nats-servers and R3 for more nodes.
  const replicas = count === 1 ? 1 : 3;
  const nats = await startNatsServers({ count: replicas, dir: join(dir, 'nats'), keep: true, log: (line) => log(`${kind}: ${line}`) });
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
        replicas,
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
 * goes on after the loop until the cluster caught up (waitCaughtUp: every held partition applied as far
 * as NATS delivered it): the CPU per event then includes the followers' work, and `appliedPerSecond`
 * is the rate at which events were acknowledged *and* applied by their owners' followers.
 */
const measuredLoop = async ({ deployment, dispatcher, book, concurrency, events, capS, sampleMs, adminKey, catchUpS, open }) => {
  const procs = processesOf(deployment);
  const all = [...procs.nodes.map((p) => ({ ...p, role: 'nodes' })), ...procs.nats.map((p) => ({ ...p, role: 'nats' }))];
  const clustered = deployment.nats.length > 0;
  let catchUp;
  const trafficBefore = clustered ? await natsTraffic(deployment) : undefined;
  const { result, samples, generatorCpuPct } = await sampled(all, sampleMs, async () => {
    // (`open`: an open loop at `open.rate` for `open.durationS` instead of the closed one)
    const loop = open
      ? await runOpenLoop({ book, pool: dispatcher, rate: open.rate, durationS: open.durationS, capS })
      : await runClosedLoop({ book, pool: dispatcher, concurrency, events, capS });
    if (clustered) catchUp = await waitCaughtUp(deployment, adminKey, catchUpS * 1000);
    return loop;
  });
  const traffic = clustered ? trafficPerEvent(trafficBefore, await natsTraffic(deployment), result.acked) : undefined;
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
    ...(traffic ? { natsTraffic: traffic } : {}),
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
    `${deployment.kind}: failover: ${victim} (pid ${victimNode.pid}) owns ${instances.length} of ${probeCount} probed instances (${JSON.stringify(ownedBy)})`,
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
    out.lagAtKill = await progressOf(deployment, adminKey);
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
      `${deployment.kind}: failover: ${out.failover.served}/${out.failover.instances} served again, p50 ${out.failover.ms.p50} ms, p99 ${out.failover.ms.p99} ms, max ${out.failover.ms.max} ms; failed requests meanwhile ${out.failedDuringFailover} (${JSON.stringify(probeCounts)})`,
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
      // Clusters of 2 or more: each instance's owner, asked once (nothing changes membership until the failover).
      const many = deployment.nodes.length > 1;
      let owned;
      if (many) {
        const orgId = (await getJson(urls[0], '/orgs', config.adminKey)).orgs[0].id;
        const owners = await ownersOf(
          urls[0],
          config.adminKey,
          orgId,
          Array.from({ length: book.count }, (_, i) => book.slug(i)),
        );
        const indexOf = Object.fromEntries(deployment.nodes.map((n, k) => [n.id, k]));
        out.ownedInstances = {};
        for (const owner of Object.values(owners)) out.ownedInstances[owner] = (out.ownedInstances[owner] ?? 0) + 1;
        owned = (slug) => indexOf[owners[slug]];
      }
      /** A loop through a dispatcher of its own: `owners` sends each request to its instance's owner, `nonOwner` to the next node after it. */
      const routedLoop = async (concurrency, events, route) => {
        const pick = route === 'owners' ? owned : (slug) => nonOwnerIndex(owned(slug), urls.length);
        const dispatcher = ownerRouted(
          urls.map((url) => makePool(url, concurrency)),
          pick,
        );
        try {
          return await loop(concurrency, events, dispatcher);
        } finally {
          await dispatcher.close();
        }
      };
      const say = (name, p) =>
        log(`${kind}: ${name}: ${p.throughput} ev/s, p50 ${p.latencyMs.p50}, p99 ${p.latencyMs.p99} ms, ${JSON.stringify(p.statusCounts)}`);
      out.c64 = await loop(scenario.concurrency, scenario.events);
      say(`C=${scenario.concurrency}${many ? ' spread' : ''}`, out.c64);
      if (scenario.openRate > 0) {
        // Every deployment at the same rate (config.mjs, openRate): what each spends per event at one load.
        out.open = await measuredLoop({
          deployment,
          dispatcher: spread,
          book,
          events: 0,
          capS: scenario.capS,
          sampleMs: config.sampleMs,
          adminKey: config.adminKey,
          catchUpS: scenario.catchUpS,
          open: { rate: scenario.openRate, durationS: scenario.openS },
        });
        say(`open loop at ${scenario.openRate}/s${many ? ' spread' : ''}`, out.open);
      }
      if (many && scenario.directEvents > 0) {
        // The same C=64 loop with every request sent to its instance's owner: no forwarding hop.
        out.direct = await routedLoop(scenario.concurrency, scenario.directEvents, 'owners');
        say(`C=${scenario.concurrency} straight to owners`, out.direct);
      }
      out.c1 = await loop(1, scenario.c1Events);
      say(`C=1${many ? ' spread' : ''}`, out.c1);
      if (many) {
        out.c1Owners = await routedLoop(1, scenario.c1Events, 'owners');
        say('C=1 straight to owners', out.c1Owners);
        out.c1NonOwner = await routedLoop(1, scenario.c1Events, 'nonOwner');
        say('C=1 through a node that does not own the instance', out.c1NonOwner);
      }
    } finally {
      await spread.close();
    }
    let verifyUrl = urls[0];
    if (kind === scenario.failoverOn && deployment.nodes.length >= 3 && scenario.failoverInstances > 0) {
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
      ['create', 'c64', 'open', 'c1', 'direct', 'c1Owners', 'c1NonOwner'].some(
        (phase) => d[phase] && Object.keys(d[phase].statusCounts ?? {}).some((key) => key !== '200'),
      ) ||
      (d.failover && d.failover.failover?.notServed !== 0),
  );
};

// ---------------------------------------------------------------------------------------------------
// Report

/** The number of nodes of a deployment kind (embedded: 1). */
const nodesOf = (kind) => (kind === 'embedded' ? 1 : Number(/^cluster-(\d+)$/.exec(kind)?.[1]));

/** The capacity model from a run's figures: embedded's C=64 CPU per event, and each cluster's C=64 loops (spread; straight to owners). */
export const capacityOf = (r, options) => {
  const embedded = r.deployments?.find((d) => d.kind === 'embedded');
  const clusters = (r.deployments ?? [])
    .filter((d) => d.kind !== 'embedded' && d.c64?.cpu?.nodes)
    .map((d) => ({
      kind: d.kind,
      nodes: nodesOf(d.kind),
      spreadNodeUs: d.c64.cpu.nodes.perProcessUs,
      natsUs: d.c64.cpu.nats?.perProcessUs,
      ownersNodeTotalUs: d.direct?.cpu?.nodes?.totalUs ?? null,
    }));
  if (!clusters.length) return undefined;
  return capacityModel({ embeddedUs: embedded?.c64?.cpu?.nodes?.totalUs ?? null, clusters }, options);
};

/**
 * The issue's aims ("the cluster must add capacity"), each with its figure and whether it is met:
 * cluster-3 spread at C=64 costs ≤ 2× embedded's CPU per event cluster-wide (nodes + nats-servers);
 * per-node CPU per event at N=3 ≤ 0.5× N=1, at N=5 lower still; the capacity model's N=3 ≥ 2.5× one
 * embedded node; C=1 p50 through a node that does not own the instance ≤ 2× embedded's; failover p99 ≤
 * 1.5 s with no failed request. Aims whose figures are missing are left out.
 */
export const clusterAims = (r) => {
  const find = (kind) => r.deployments?.find((d) => d.kind === kind);
  const embedded = find('embedded');
  const c1 = find('cluster-1');
  const c3 = find('cluster-3');
  const c5 = find('cluster-5');
  const perNode = (d, loop = 'c64') => (d?.[loop]?.cpu?.nodes?.totalUs == null ? null : d[loop].cpu.nodes.totalUs / nodesOf(d.kind));
  const wideUs = (d, loop) => (d?.[loop]?.cpu?.nodes ? d[loop].cpu.nodes.totalUs + (d[loop].cpu.nats?.totalUs ?? 0) : null);
  const aims = [];
  const add = (aim, value, target, met) => {
    if (value != null && Number.isFinite(value)) aims.push({ aim, value: round(value, 2), target, met });
  };
  const embUs = embedded?.c64?.cpu?.nodes?.totalUs;
  if (embUs && c3?.c64?.cpu?.nodes) {
    const wide = c3.c64.cpu.nodes.totalUs + (c3.c64.cpu.nats?.totalUs ?? 0);
    add('cluster-3 spread: cluster-wide CPU per event ÷ embedded', wide / embUs, '≤ 2', wide / embUs <= 2);
  }
  if (perNode(c1) && perNode(c3))
    add('per-node CPU per event: N=3 ÷ N=1', perNode(c3) / perNode(c1), '≤ 0.5', perNode(c3) / perNode(c1) <= 0.5);
  if (perNode(c3) && perNode(c5)) add('per-node CPU per event: N=5 ÷ N=3', perNode(c5) / perNode(c3), '< 1', perNode(c5) < perNode(c3));
  // The same two figures with every deployment at one rate (the open loop): the work, not the speed.
  const embOpen = wideUs(embedded, 'open');
  const c3Open = wideUs(c3, 'open');
  const rate = r.scenario?.openRate;
  if (embOpen && c3Open)
    add(
      `at one load (open loop, ${rate}/s): cluster-3 cluster-wide CPU per event ÷ embedded`,
      c3Open / embOpen,
      '≤ 2',
      c3Open / embOpen <= 2,
    );
  if (perNode(c1, 'open') && perNode(c3, 'open'))
    add(
      `at one load (open loop, ${rate}/s): per-node CPU per event N=3 ÷ N=1`,
      perNode(c3, 'open') / perNode(c1, 'open'),
      '≤ 0.5',
      perNode(c3, 'open') / perNode(c1, 'open') <= 0.5,
    );
  const model = capacityOf(r);
  const m3 = model?.rows.find((x) => x.kind === 'cluster-3');
  if (m3?.vsEmbedded != null) add('capacity model: N=3 ÷ one embedded node', m3.vsEmbedded, '≥ 2.5', m3.vsEmbedded >= 2.5);
  const embP50 = embedded?.c1?.latencyMs?.p50;
  const foreign = c3?.c1NonOwner?.latencyMs?.p50;
  if (embP50 && foreign) add('cluster-3 C=1 p50 through a non-owner ÷ embedded', foreign / embP50, '≤ 2', foreign / embP50 <= 2);
  const f = r.deployments?.find((d) => d.failover?.failover)?.failover;
  if (f?.failover?.ms?.p99 != null)
    add(
      `failover p99 ms (${f.failover.served} of ${f.failover.instances} served, ${f.failedDuringFailover} failed requests)`,
      f.failover.ms.p99,
      '≤ 1,500, none failed',
      f.failover.ms.p99 <= 1500 && f.failover.notServed === 0 && f.failedDuringFailover === 0,
    );
  return aims;
};

export const clusterMarkdown = (r, fmt) => {
  const catchUpText = (p) => {
    if (!p.catchUp) return '–';
    if (p.catchUp.timedOut)
      return `**not caught up** (lag ${int(p.catchUp.end?.lag)}, ${int(p.catchUp.end?.notReady)} partitions not ready after ${r.scenario.catchUpS} s)`;
    return `${int(p.appliedPerSecond)} (${fmt(p.catchUp.caughtUpS)} s, ${int(p.catchUp.atStart?.lag)})`;
  };
  const failures = failureText;
  const s = r.scenario;
  const kinds = (r.deployments ?? []).map((d) => d.kind).join(', ');
  const lines = [
    '',
    `### cluster: ${kinds} on this host (K=${int(s.instances)}, C=${s.concurrency}: ${int(s.events)} events, C=1: ${int(s.c1Events)} events, after ${int(s.warmupEvents)} warm-up events)`,
    '',
    'Each deployment fresh, everything on this host (nodes, nats-servers, the load in the bench process); cluster-1 on one nats-server (R1), larger clusters on three (R3). On a cluster of 2 or more: requests round-robin over the nodes ("spread"), straight to each instance\'s owner ("owners"), or each to the node after its owner ("non-owner"). "open": every deployment at the same rate, an open loop spread over its nodes (a process\'s CPU per event falls as its rate grows: at one load the figures compare the work, not the speed). CPU µs per acked event: every node with its sandbox workers (all nodes: main thread / other threads / sandbox workers; per node: mean, and the busiest), every nats-server, and the two summed ("cluster-wide").',
    '',
    '| deployment | load | acked ev/s | p50 | p99 | max | non-200 | caught up: ev/s (s, lag at loop end) | node CPU µs/ev (main / other / worker) | per node: mean / busiest | NATS CPU µs/ev | cluster-wide µs/ev | host busy cores | bench CPU % | verified |',
    '|---|---|---:|---:|---:|---:|---|---|---|---|---:|---:|---:|---:|---|',
  ];
  for (const d of r.deployments ?? []) {
    const verified = d.error
      ? '**error**'
      : d.verify
        ? d.verify.ok
          ? `ok (${int(d.verify.historyEvents)} ev)`
          : `**${d.verify.mismatches} mismatches**`
        : '–';
    const many = nodesOf(d.kind) > 1;
    for (const [name, p] of [
      [`C=${s.concurrency}${many ? ' spread' : ''}`, d.c64],
      [`C=${s.concurrency} owners`, d.direct],
      [`open ${int(s.openRate)}/s${many ? ' spread' : ''}`, d.open],
      [`C=1${many ? ' spread' : ''}`, d.c1],
      ['C=1 owners', d.c1Owners],
      ['C=1 non-owner', d.c1NonOwner],
    ]) {
      if (!p) continue;
      const n = p.cpu?.nodes ?? {};
      const split = n.splitUs ? ` (${fmt(n.splitUs.main, 0)} / ${fmt(n.splitUs.nodeOther, 0)} / ${fmt(n.splitUs.worker, 0)})` : '';
      const per = Object.values(n.perProcessUs ?? {}).filter((x) => typeof x === 'number');
      const perNode = per.length > 1 ? `${fmt(n.totalUs / per.length, 0)} / ${fmt(Math.max(...per), 0)}` : '–';
      const natsUs = d.kind === 'embedded' ? null : p.cpu?.nats?.totalUs;
      const wide = n.totalUs == null ? null : n.totalUs + (natsUs ?? 0);
      lines.push(
        `| ${d.kind} | ${name} | ${int(p.throughput)} | ${fmt(p.latencyMs?.p50)} | ${fmt(p.latencyMs?.p99)} | ${fmt(p.latencyMs?.max)} | ${failures(p.statusCounts)}${p.cappedByTime ? ' (time cap)' : ''} | ${catchUpText(p)} | ` +
          `${fmt(n.totalUs, 0)}${split} | ${perNode} | ${natsUs == null ? '–' : fmt(natsUs, 0)} | ${fmt(wide, 0)} | ${fmt(p.hostBusyCores)} | ${fmt(p.generatorCpuPct, 0)} | ${verified} |`,
      );
    }
    if (d.create)
      lines.push(
        `| ${d.kind} | create (16 in flight) | ${int(d.create.perSecond)} | ${fmt(d.create.latencyMs.p50)} | ${fmt(d.create.latencyMs.p99)} | ${fmt(d.create.latencyMs.max)} | ${failures(d.create.statusCounts)} | | | | | | | | |`,
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
  for (const d of r.deployments ?? []) {
    const natsPer = d.c64?.cpu?.nats?.perProcessUs;
    if (d.kind === 'embedded' || !natsPer) continue;
    const held = d.warmup?.catchUp?.heldInstances;
    lines.push(
      '',
      `${d.kind} at C=${s.concurrency}${nodesOf(d.kind) > 1 ? ' spread' : ''}, CPU µs per event by process: ${[...Object.entries(d.c64.cpu.nodes.perProcessUs), ...Object.entries(natsPer)].map(([id, us]) => `${id} ${fmt(us, 0)}`).join(', ')}` +
        (d.ownedInstances
          ? `; instances owned: ${Object.entries(d.ownedInstances)
              .map(([id, n]) => `${id} ${n}`)
              .join(', ')}`
          : '') +
        (held
          ? `; held after the warm-up: ${Object.entries(held)
              .map(([id, n]) => `${id} ${int(n)}`)
              .join(', ')}`
          : '') +
        '.',
    );
    const traffic = [
      [`C=${s.concurrency}${nodesOf(d.kind) > 1 ? ' spread' : ''}`, d.c64],
      [`C=${s.concurrency} owners`, d.direct],
      [`open ${int(s.openRate)}/s`, d.open],
      ['C=1', d.c1],
    ].filter(([, p]) => p?.natsTraffic);
    if (traffic.length)
      lines.push(
        '',
        `${d.kind}, the nats-servers' traffic per acked event (/varz, all servers; messages in / out, bytes in / out): ${traffic
          .map(
            ([name, p]) =>
              `${name} ${fmt(p.natsTraffic.inMsgs, 1)} / ${fmt(p.natsTraffic.outMsgs, 1)} msgs, ${int(p.natsTraffic.inBytes)} / ${int(p.natsTraffic.outBytes)} bytes`,
          )
          .join('; ')}.`,
      );
  }
  const fd = (r.deployments ?? []).find((d) => d.failover?.failover);
  const f = fd?.failover;
  if (f?.failover) {
    const ms = f.failover.ms;
    lines.push(
      '',
      `Failover (${fd.kind}, heartbeat ${f.heartbeat.heartbeatMs} ms × ${f.heartbeat.missedHeartbeats}, the defaults): ${f.victim} owned ${f.failover.instances} of ${f.probed} probed instances (${JSON.stringify(f.ownedBy)}) and was SIGKILLed under a steady ${f.rate} events/s through the others; ` +
        `each of its instances re-sent its next event every ${f.retryMs} ms until answered 200. From the kill to that answer: p50 ${fmt(ms.p50, 0)} ms, p99 ${fmt(ms.p99, 0)} ms, max ${fmt(ms.max, 0)} ms (min ${fmt(ms.min, 0)}); ` +
        `${f.failover.served} of ${f.failover.instances} served again. Failed requests meanwhile: ${int(f.failedDuringFailover)} (probes: ${failures(f.probeStatusCounts)}; steady load: ${failures(f.steady.duringFailover.statusCounts)}). ` +
        `Steady load before the kill p99 ${fmt(f.steady.beforeKill.latencyMs.p99)} ms, during the failover max ${fmt(f.steady.duringFailover.latencyMs.max, 0)} ms, after it p99 ${fmt(f.steady.afterFailover.latencyMs.p99)} ms. ` +
        `Followers' lag at the kill: ${int(f.lagAtKill?.lag)} TX entries. Members after: ${(f.membersAfter ?? []).join(', ')}; the victim's sandbox workers left running: ${f.victimDescendantsLeft?.length ?? '–'}.`,
    );
  }
  const model = capacityOf(r);
  if (model) {
    lines.push(
      '',
      `Capacity model (measured C=${s.concurrency} CPU per event; each node and each nats-server on a host of its own with ${model.coresPerHost} cores; a cluster is bound by its busiest node, or its busiest nats-server): one embedded node ${fmt(model.embeddedUs, 0)} µs/event, ≈ ${int(model.embeddedLimitPerSecond)}/s.`,
      '',
      '| deployment | nodes µs/ev (per node) | busiest node µs/ev | NATS µs/ev (busiest) | cluster-wide µs/ev (× embedded) | limit /s (bound) | × one embedded node | if evenly divided /s |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const x of model.rows)
      lines.push(
        `| ${x.kind} | ${fmt(x.nodesTotalUs, 0)} (${fmt(x.perNodeUs, 0)}) | ${fmt(x.busiestNodeUs, 0)} | ${fmt(x.natsTotalUs, 0)} (${fmt(x.natsBusiestUs, 0)}) | ${fmt(x.clusterWideUs, 0)} (${fmt(x.cpuVsEmbedded)}) | ${int(x.limitPerSecond)} (${x.boundBy}) | ${fmt(x.vsEmbedded)} | ${int(x.evenLimitPerSecond)} |`,
      );
    const pr = model.projection;
    if (pr)
      lines.push(
        '',
        `Projected from ${pr.from} (exec ${fmt(pr.execUs, 0)} µs per event straight to owners, forward ${fmt(pr.forwardUs, 0)} µs per forwarded request; NATS bound ${int(pr.natsLimitPerSecond)}/s${pr.clamped.length ? `; clamped to 0 (noise): ${pr.clamped.join(', ')}` : ''}): ` +
          `${pr.rows.map((p) => `N=${p.nodes}: ${int(p.perNodeUsPerEvent)} µs per event per node, ≈ ${int(p.limitPerSecond)}/s (${p.boundBy}, ${fmt(p.vsEmbedded)}× embedded)`).join('; ')}.`,
      );
  }
  const aims = clusterAims(r);
  if (aims.length)
    lines.push(
      '',
      `Aims (printed, not asserted): ${aims.map((a) => `${a.aim}: ${fmt(a.value)} (aim ${a.target}: ${a.met ? 'met' : '**not met**'})`).join('; ')}.`,
    );
  if (r.processes)
    lines.push(
      '',
      `Processes started: ${r.processes.started}; running at the end before the final kill: ${r.processes.leftRunningAtEnd.length ? r.processes.leftRunningAtEnd.join(', ') : 'none'}; still running after it: ${r.processes.stillRunning.length || 'none'}.`,
    );
  if (r.error) lines.push('', `**cluster failed:** ${r.error}`);
  return lines;
};
