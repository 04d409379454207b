import t from 'tap';
import { checkInvariants, setUpLedger, startFaultCluster, startLoad, summary, untilNodesApplied } from './helpers/cluster-load.js';
import { eventually } from './helpers/eventually.js';
import { natsMissing } from './helpers/nats.js';

/**
 * A node paused under load: three nodes on a 3-server NATS (R3); the third is stopped (SIGSTOP) for
 * 5 s, far past its heartbeats (100 ms × 4), while requests reach every node, then resumed (SIGCONT):
 * what it held or was asked meanwhile runs when it wakes, after the others took its instances over.
 * Every acknowledged event must be in every node's history exactly once, nothing answered 4xx anywhere,
 * and every node must answer the same (helpers/cluster-load.ts).
 */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'cluster-pause-admin';

t.test(
  'a node paused past its heartbeats under load: every acknowledged event once everywhere, no 4xx left behind, the nodes agree',
  { skip, timeout: 150_000 },
  async (t) => {
    const { nats, nodes } = await startFaultCluster(t, ADMIN);
    const names = Array.from({ length: 9 }, (_, i) => `q${i}`);
    const orgId = await setUpLedger(nodes, ADMIN, names);
    const paused = nodes[2]?.child;

    const load = startLoad({ nodes, token: ADMIN, orgId, names, workersPerNode: 2, maxEvents: 5_000, maxMs: 60_000 });
    // (the load under way through every node before the fault, and after it until the resumed node
    // acknowledges events again: conditions, not fixed times, so a slow host waits and a fast one does not)
    await eventually(() => [0, 1, 2].every((node) => load.acknowledged({ node }) >= 20), {
      timeoutMs: 30_000,
      message: 'every node acknowledges events under the load',
    });
    paused?.kill('SIGSTOP');
    t.teardown(() => paused?.kill('SIGCONT'));
    await sleep(5_000);
    paused?.kill('SIGCONT');
    const resumed = Date.now();
    await eventually(
      () => load.ended() || (load.acknowledged({ node: 2, since: resumed }) >= 30 && load.acknowledged({ since: resumed }) >= 100),
      {
        timeoutMs: 30_000,
        message: 'the resumed node acknowledges events again',
      },
    );
    t.pass(`the resumed node acknowledged events again within ${Date.now() - resumed} ms`);
    const report = await load.stop();
    t.comment(summary(report));
    t.ok(report.count('ok') > 100, `${report.count('ok')} events acknowledged`);

    await untilNodesApplied(nats.urls, nodes, ADMIN);
    await checkInvariants(t, { nodes, token: ADMIN, orgId, names, report });
    if (process.env.STATEHOLD_TEST_VERBOSE) for (const node of nodes) t.comment(node.output().slice(-6_000));
  },
);
