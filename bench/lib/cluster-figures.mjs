// The cluster scenario's figures (bench/lib/cluster.mjs runs it): the pure helpers its loops and
// failover use (dispatchers, the victim, CPU per event, catch-up progress, the capacity model, failover
// times, NATS traffic per event; tested in test/bench-cluster.test.ts) and its report (the aims, the
// markdown). Nothing here starts a process or asks a node.
import { summarize, round } from './stats.mjs';
import { failureText, int } from './markdown-format.mjs';

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

/** Per acked event, what the nats-servers took in and sent out between two natsTraffic readings. */
export const trafficPerEvent = (before, after, acked) => {
  if (!before || !after || !(acked > 0)) return undefined;
  const per = (key) => round((after[key] - before[key]) / acked, 1);
  return { inMsgs: per('inMsgs'), outMsgs: per('outMsgs'), inBytes: per('inBytes'), outBytes: per('outBytes') };
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
