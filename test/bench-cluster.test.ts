/** The cluster bench scenario's pure parts: spreading requests, picking the node to kill, CPU per event, the capacity model, the verdict. */
import assert from 'node:assert/strict';
import t from 'tap';
import { capacityModel, clusterFailed, cpuPerEvent, failoverFigures, ownerRouted, pickVictim, roundRobin } from '../bench/lib/cluster.mjs';

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

t.test('capacity model: exec, apply and forward from three measurements, projected to N nodes', async (t) => {
  // c1 = exec = 500; direct = exec + 2 apply = 900; spread = direct + 2/3 forward = 1100
  const m = capacityModel({ c1Us: 500, directUs: 900, spreadUs: 1100, natsBusiestUs: 200 }, { nodes: [1, 3], coresPerHost: 2 });
  assert.ok(m, 'three measurements give a model');
  t.equal(m.execUs, 500);
  t.equal(m.applyUs, 200);
  t.equal(m.forwardUs, 300);
  t.equal(m.natsLimitPerSecond, 10_000);
  t.equal(m.applyCeilingPerSecond, 10_000);
  t.same(m.projection[0], {
    nodes: 1,
    clusterNodeUsPerEvent: 500,
    perNodeUsPerEvent: 500,
    nodesLimitPerSecond: 4000,
    limitPerSecond: 4000,
    boundBy: 'nodes',
  });
  t.equal(m.projection[1]?.clusterNodeUsPerEvent, 1100, 'N=3 reproduces the spread measurement');
  t.equal(m.projection[1]?.limitPerSecond, 5455);
  const noisy = capacityModel({ c1Us: 700, directUs: 600, spreadUs: 650 });
  t.same(noisy?.clamped, ['apply'], 'a negative part is clamped and named');
  t.equal(capacityModel({ c1Us: 700, directUs: undefined, spreadUs: 1300 }), undefined);
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
  t.equal(clusterFailed({ ...ok, deployments: [{ ...d, failover: { failover: { notServed: 2 } } }] }), true);
});
