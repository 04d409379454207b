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
// process it started is stopped at the end, and checked to be gone. Its figures and report (the
// capacity model, the aims, the markdown) are in cluster-figures.mjs.
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
import {
  clusterProgress,
  cpuPerEvent,
  failoverFigures,
  nonOwnerIndex,
  ownerRouted,
  pickVictim,
  roundRobin,
  trafficPerEvent,
} from './cluster-figures.mjs';

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
