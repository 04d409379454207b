/** The cluster bench scenario's pure parts: spreading requests, picking the node to kill, catching up, CPU per event, the capacity model, the aims, the verdict. */
import assert from 'node:assert/strict';
import t from 'tap';
import {
  capacityModel,
  capacityOf,
  clusterAims,
  trafficPerEvent,
  clusterFailed,
  clusterProgress,
  cpuPerEvent,
  failoverFigures,
  nonOwnerIndex,
  ownerRouted,
  partitionOfFilter,
  pickVictim,
  roundRobin,
} from '../bench/lib/cluster-figures.mjs';

const fakePool = (name: string, seen: string[]) => ({
  dispatch: (options: { path: string }) => {
    seen.push(`${name} ${options.path}`);
    return true;
  },
  close: async () => undefined,
});

t.test('round-robin: each request to the next node in turn, as a load balancer', async (t) => {
  const seen: string[] = [];
  const rr = roundRobin(['a', 'b', 'c'].map((n) => fakePool(n, seen)));
  for (let i = 0; i < 7; i++) rr.dispatch({ method: 'POST', path: `/p${i}` }, {});
  t.same(seen, ['a /p0', 'b /p1', 'c /p2', 'a /p3', 'b /p4', 'c /p5', 'a /p6']);
});

t.test('owner-routed: instance requests to their owner, the rest round-robin', async (t) => {
  const seen: string[] = [];
  const owners: Record<string, number> = { x: 2, y: 0 };
  const routed = ownerRouted(
    ['a', 'b', 'c'].map((n) => fakePool(n, seen)),
    (slug: string) => owners[slug],
  );
  routed.dispatch({ path: '/machines/m/i/x/events' }, {});
  routed.dispatch({ path: '/machines/m/i/y/events' }, {});
  routed.dispatch({ path: '/machines/m/i/x' }, {});
  routed.dispatch({ path: '/machines/m/i/unknown/events' }, {});
  routed.dispatch({ path: '/machines/m' }, {});
  t.same(seen, [
    'c /machines/m/i/x/events',
    'a /machines/m/i/y/events',
    'c /machines/m/i/x',
    'a /machines/m/i/unknown/events',
    'b /machines/m',
  ]);
});

t.test('the victim owns the most probed instances; its instances are listed', async (t) => {
  const v = pickVictim({ i0: 'n1', i1: 'n2', i2: 'n2', i3: 'n3', i4: 'n2', i5: 'n1' });
  t.equal(v.victim, 'n2');
  t.same(v.counts, { n1: 2, n2: 3, n3: 1 });
  t.same(v.instances, ['i1', 'i2', 'i4']);
  t.equal(pickVictim({ a: 'n1', b: 'n2' }).victim, 'n1', 'a tie goes to the first seen');
});

t.test('CPU per event: per role, per process, and the node split summed', async (t) => {
  const sample = (cpuPct: number, split?: { main: number; nodeOther: number; worker: number }) => ({ cpuPct, cpuSplitPct: split });
  const c = cpuPerEvent(
    {
      nodes: [
        { id: 'n1', sample: sample(50, { main: 30, nodeOther: 10, worker: 10 }) },
        { id: 'n2', sample: sample(30, { main: 20, nodeOther: 5, worker: 5 }) },
      ],
      nats: [{ id: 's1', sample: sample(10, { main: 0, nodeOther: 10, worker: 0 }) }],
      none: [],
    },
    1000,
  );
  // 80 % of a core at 1,000 events/s: 800 µs per event
  t.equal(c.nodes.totalUs, 800);
  t.same(c.nodes.perProcessUs, { n1: 500, n2: 300 });
  t.same(c.nodes.splitUs, { main: 500, nodeOther: 150, worker: 150 });
  t.equal(c.nats.totalUs, 100);
  t.equal(c.none.totalUs, null);
  t.equal(cpuPerEvent({ nodes: [{ id: 'n1', sample: sample(50) }] }, 0).nodes.totalUs, null, 'no events, no figure');
});

t.test('through a non-owner: the node after the owner, none on a single node', async (t) => {
  t.equal(nonOwnerIndex(0, 3), 1);
  t.equal(nonOwnerIndex(2, 3), 0);
  t.equal(nonOwnerIndex(4, 5), 0);
  t.equal(nonOwnerIndex(0, 1), undefined);
  t.equal(nonOwnerIndex(undefined, 3), undefined);
  const seen: string[] = [];
  const owners: Record<string, number> = { x: 2, y: 0 };
  const routed = ownerRouted(
    ['a', 'b', 'c'].map((n) => fakePool(n, seen)),
    (slug: string) => nonOwnerIndex(owners[slug], 3),
  );
  routed.dispatch({ path: '/machines/m/i/x/events' }, {});
  routed.dispatch({ path: '/machines/m/i/y/events' }, {});
  t.same(seen, ['a /machines/m/i/x/events', 'b /machines/m/i/y/events']);
});

t.test('the partition a TX consumer follows, from its filter subject', async (t) => {
  t.equal(partitionOfFilter('statehold.c1.tx.17.>'), 17);
  t.equal(partitionOfFilter('statehold.c1.tx.0.>'), 0);
  t.equal(partitionOfFilter('statehold.c1.meta.>'), undefined);
  t.equal(partitionOfFilter('statehold.c1.tx.>'), undefined);
  t.equal(partitionOfFilter(undefined), undefined);
});

t.test('caught up: every node ready, every partition held, ready and delivered whole to its follower', async (t) => {
  const view = (state: string, held: Array<[number, boolean, number]>, count = 4) => ({
    state,
    heldInstances: held.length * 10,
    partitions: { count, held: held.map(([partition, ready, appliedSeq]) => ({ partition, ready, appliedSeq })) },
  });
  const consumers = [
    { filter: 'statehold.c.tx.0.>', delivered: 10, pending: 0 },
    { filter: 'statehold.c.tx.1.>', delivered: 12, pending: 0 },
    { filter: 'statehold.c.tx.2.>', delivered: 7, pending: 0 },
    { filter: 'statehold.c.tx.3.>', delivered: 9, pending: 0 },
    // a killed node's follower, behind: the most advanced one of a partition counts
    { filter: 'statehold.c.tx.3.>', delivered: 4, pending: 5 },
    { filter: 'statehold.c.meta.>', delivered: 99, pending: 3 },
  ];
  const settled = [
    {
      id: 'n1',
      view: view('ready', [
        [0, true, 10],
        [1, true, 12],
      ]),
    },
    {
      id: 'n2',
      view: view('ready', [
        [2, true, 7],
        [3, true, 9],
      ]),
    },
  ];
  const ok = clusterProgress(settled, consumers);
  t.equal(ok.caughtUp, true);
  t.equal(ok.lag, 0);
  t.equal(ok.followers, 4);
  t.same(ok.heldPartitions, { n1: 2, n2: 2 });
  t.same(ok.heldInstances, { n1: 20, n2: 20 });
  const behind = clusterProgress(
    [
      settled[0]!,
      {
        id: 'n2',
        view: view('ready', [
          [2, true, 5],
          [3, true, 9],
        ]),
      },
    ],
    consumers,
  );
  t.equal(behind.caughtUp, true, 'a watermark behind what was delivered is reported, not waited for');
  t.equal(behind.behind, 2, 'delivered but not under the watermark yet');
  const pending = clusterProgress(settled, [...consumers.slice(0, 3), { filter: 'statehold.c.tx.3.>', delivered: 9, pending: 4 }]);
  t.equal(pending.caughtUp, false);
  t.equal(pending.pendingOnServer, 4);
  t.equal(
    clusterProgress(
      [
        settled[0]!,
        {
          id: 'n2',
          view: view('ready', [
            [2, false, 7],
            [3, true, 9],
          ]),
        },
      ],
      consumers,
    ).notReady,
    1,
  );
  t.equal(
    clusterProgress(
      [
        settled[0]!,
        {
          id: 'n2',
          view: view('joining', [
            [2, true, 7],
            [3, true, 9],
          ]),
        },
      ],
      consumers,
    ).caughtUp,
    false,
  );
  const uncovered = clusterProgress([settled[0]!, { id: 'n2', view: view('ready', [[2, true, 7]]) }], consumers);
  t.equal(uncovered.uncovered, 1, 'partition 3 held by nobody');
  t.equal(uncovered.caughtUp, false);
  t.equal(clusterProgress([settled[0]!, { id: 'n2', view: undefined }], consumers).caughtUp, false, 'a node that does not answer');
  t.equal(clusterProgress(settled, []).caughtUp, true, 'no consumers listed: readiness alone');
  t.equal(clusterProgress([], consumers).caughtUp, false);
});

t.test('capacity model: busiest node and nats-server bound each cluster, projected from exec and forward', async (t) => {
  // embedded: 500 µs per event, 2 cores: 4,000/s
  const m = capacityModel(
    {
      embeddedUs: 500,
      clusters: [
        { kind: 'cluster-1', nodes: 1, spreadNodeUs: { n1: 800 }, natsUs: { s1: 200 } },
        {
          kind: 'cluster-3',
          nodes: 3,
          spreadNodeUs: { n1: 400, n2: 300, n3: 300 },
          natsUs: { s1: 250, s2: 100, s3: 100 },
          ownersNodeTotalUs: 700,
        },
      ],
    },
    { coresPerHost: 2, projectTo: [3, 9] },
  );
  t.equal(m.embeddedLimitPerSecond, 4000);
  const [one, three] = m.rows;
  t.same(one, {
    kind: 'cluster-1',
    nodes: 1,
    nodesTotalUs: 800,
    perNodeUs: 800,
    busiestNodeUs: 800,
    natsTotalUs: 200,
    natsBusiestUs: 200,
    clusterWideUs: 1000,
    cpuVsEmbedded: 2,
    limitPerSecond: 2500,
    evenLimitPerSecond: 2500,
    natsLimitPerSecond: 10000,
    boundBy: 'nodes',
    vsEmbedded: 0.63,
  });
  t.equal(three?.limitPerSecond, 5000, 'the busiest node (400 µs) binds');
  t.equal(three?.evenLimitPerSecond, 6000);
  t.equal(three?.natsLimitPerSecond, 8000);
  t.equal(three?.vsEmbedded, 1.25);
  t.equal(three?.cpuVsEmbedded, 2.9, '(1,000 + 450) ÷ 500');
  const p = m.projection;
  assert.ok(p, 'projected from the cluster with both loops');
  t.equal(p.from, 'cluster-3');
  t.equal(p.execUs, 700);
  t.equal(p.forwardUs, 450, '(1,000 − 700) × 3 / 2');
  t.equal(p.rows[0]?.clusterNodeUsPerEvent, 1000, 'N=3 gives back the spread measurement');
  t.equal(p.rows[1]?.clusterNodeUsPerEvent, 1100);
  t.equal(p.rows[1]?.limitPerSecond, 8000, 'N=9 bound by the busiest nats-server');
  t.equal(p.rows[1]?.boundBy, 'nats');
  const noisy = capacityModel({
    embeddedUs: 500,
    clusters: [{ kind: 'cluster-3', nodes: 3, spreadNodeUs: { n1: 200, n2: 200, n3: 200 }, ownersNodeTotalUs: 700 }],
  });
  t.same(noisy.projection?.clamped, ['forward'], 'a negative part is clamped and named');
  t.equal(noisy.rows[0]?.boundBy, 'nodes', 'no nats-server figures: nodes alone');
  t.equal(
    capacityModel({ embeddedUs: null, clusters: [{ kind: 'cluster-1', nodes: 1, spreadNodeUs: { n1: 800 } }] }).rows[0]?.vsEmbedded,
    null,
  );
});

/** A loop's CPU per event as the bench reports it, from each process's figure. */
const cpuOf = (nodesUs: Record<string, number>, natsUs: Record<string, number> = {}) => ({
  nodes: { totalUs: Object.values(nodesUs).reduce((a, b) => a + b, 0), perProcessUs: nodesUs },
  nats: { totalUs: Object.values(natsUs).reduce((a, b) => a + b, 0), perProcessUs: natsUs },
});

const runOf = () => {
  const loop = (nodesUs: Record<string, number>, natsUs: Record<string, number> = {}, p50 = 1) => ({
    latencyMs: { p50 },
    cpu: cpuOf(nodesUs, natsUs),
  });
  return {
    deployments: [
      { kind: 'embedded', c64: loop({ embedded: 500 }), c1: loop({ embedded: 1000 }, {}, 1.0) },
      { kind: 'cluster-1', c64: loop({ 'node-1': 900 }, { 'nats-1': 100 }) },
      {
        kind: 'cluster-3',
        c64: loop({ 'node-1': 250, 'node-2': 200, 'node-3': 150 }, { 'nats-1': 200, 'nats-2': 100, 'nats-3': 100 }),
        direct: loop({ 'node-1': 150, 'node-2': 150, 'node-3': 150 }),
        c1NonOwner: loop({ 'node-1': 1 }, {}, 1.8),
        failover: { failover: { ms: { p99: 1200 }, served: 30, instances: 30, notServed: 0 }, failedDuringFailover: 0 },
      },
      { kind: 'cluster-5', c64: loop({ 'node-1': 130, 'node-2': 130, 'node-3': 130, 'node-4': 130, 'node-5': 130 }) },
    ],
  };
};

t.test('capacity of a run: embedded and each cluster; projected from the largest cluster with both loops', async (t) => {
  const m = capacityOf(runOf());
  assert.ok(m);
  t.same(
    m.rows.map((x) => x.kind),
    ['cluster-1', 'cluster-3', 'cluster-5'],
  );
  t.equal(m.embeddedUs, 500);
  t.equal(m.rows[1]?.limitPerSecond, 8000, 'busiest node 250 µs');
  t.equal(m.projection?.from, 'cluster-3', 'cluster-5 has no loop straight to owners');
  t.equal(capacityOf({ deployments: [{ kind: 'embedded' }] }), undefined);
});

t.test('aims: each figure with its target, met or not', async (t) => {
  const aims = clusterAims(runOf());
  const byName = Object.fromEntries(aims.map((a) => [a.aim.split(' (')[0], a]));
  t.same(byName['cluster-3 spread: cluster-wide CPU per event ÷ embedded'], {
    aim: 'cluster-3 spread: cluster-wide CPU per event ÷ embedded',
    value: 2,
    target: '≤ 2',
    met: true,
  });
  t.equal(byName['per-node CPU per event: N=3 ÷ N=1']?.value, 0.22);
  t.equal(byName['per-node CPU per event: N=5 ÷ N=3']?.met, true);
  t.equal(byName['capacity model: N=3 ÷ one embedded node']?.value, 2);
  t.equal(byName['capacity model: N=3 ÷ one embedded node']?.met, false);
  t.equal(byName['cluster-3 C=1 p50 through a non-owner ÷ embedded']?.value, 1.8);
  t.equal(byName['failover p99 ms']?.met, true);
  t.same(clusterAims({ deployments: [] }), [], 'nothing measured, no aims');

  // With every deployment at one rate (the open loop), the same two figures from those loops.
  const run = runOf() as ReturnType<typeof runOf> & { scenario?: { openRate: number } };
  const open = (nodesUs: Record<string, number>, natsUs: Record<string, number> = {}) => ({ cpu: cpuOf(nodesUs, natsUs) });
  run.scenario = { openRate: 800 };
  Object.assign(run.deployments[0] as object, { open: open({ embedded: 600 }) });
  Object.assign(run.deployments[1] as object, { open: open({ 'node-1': 900 }, { 'nats-1': 100 }) });
  Object.assign(run.deployments[2] as object, {
    open: open({ 'node-1': 300, 'node-2': 300, 'node-3': 300 }, { 'nats-1': 150, 'nats-2': 75, 'nats-3': 75 }),
  });
  const atOneLoad = Object.fromEntries(clusterAims(run).map((a) => [a.aim, a]));
  t.same(atOneLoad['at one load (open loop, 800/s): cluster-3 cluster-wide CPU per event ÷ embedded'], {
    aim: 'at one load (open loop, 800/s): cluster-3 cluster-wide CPU per event ÷ embedded',
    value: 2,
    target: '≤ 2',
    met: true,
  });
  t.equal(atOneLoad['at one load (open loop, 800/s): per-node CPU per event N=3 ÷ N=1']?.value, 0.33);
  t.equal(atOneLoad['at one load (open loop, 800/s): per-node CPU per event N=3 ÷ N=1']?.met, true);
});

t.test("the nats-servers' traffic per acked event, from two readings of their counters", async (t) => {
  const before = { inMsgs: 100, outMsgs: 50, inBytes: 10_000, outBytes: 5_000 };
  const after = { inMsgs: 1_100, outMsgs: 2_050, inBytes: 410_000, outBytes: 205_000 };
  t.same(trafficPerEvent(before, after, 200), { inMsgs: 5, outMsgs: 10, inBytes: 2_000, outBytes: 1_000 });
  t.equal(trafficPerEvent(undefined, after, 200), undefined, 'a server that did not answer: nothing');
  t.equal(trafficPerEvent(before, after, 0), undefined, 'no event acknowledged: nothing');
});

t.test('failover figures: served, not served, the distribution', async (t) => {
  const f = failoverFigures([1100, 1200, 1300], 4);
  t.equal(f.served, 3);
  t.equal(f.notServed, 1);
  t.equal(f.ms.p50, 1200);
  t.equal(f.ms.max, 1300);
});

t.test('failed: errors, mismatches, non-200 in steady phases, unserved instances, processes left', async (t) => {
  const ok = {
    deployments: [
      {
        kind: 'cluster-3',
        verify: { ok: true },
        stateMismatches: 0,
        c64: { statusCounts: { 200: 10 } },
        failover: { failover: { notServed: 0 } },
      },
    ],
    processes: { started: 7, leftRunningAtEnd: [], stillRunning: [] },
  };
  t.equal(clusterFailed(ok), false);
  t.equal(clusterFailed({ ...ok, error: 'boom' }), true);
  t.equal(clusterFailed({ ...ok, deployments: [] }), true);
  t.equal(clusterFailed({ ...ok, processes: { started: 7, leftRunningAtEnd: ['123 (node)'], stillRunning: [] } }), true);
  const d = ok.deployments[0];
  t.equal(clusterFailed({ ...ok, deployments: [{ ...d, verify: { ok: false } }] }), true);
  t.equal(clusterFailed({ ...ok, deployments: [{ ...d, c64: { statusCounts: { 200: 9, '503 unavailable': 1 } } }] }), true);
  t.equal(clusterFailed({ ...ok, deployments: [{ ...d, c1NonOwner: { statusCounts: { 200: 9, '503 unavailable': 1 } } }] }), true);
  t.equal(clusterFailed({ ...ok, deployments: [{ ...d, failover: { failover: { notServed: 2 } } }] }), true);
});
