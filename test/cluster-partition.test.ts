import t from 'tap';
import { checkInvariants, setUpLedger, startLoad, summary, untilNodesApplied } from './helpers/cluster-load.js';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';
import { startTcpProxy } from './helpers/tcp-proxy.js';

/**
 * A node cut off from NATS under load: three nodes on a 3-server NATS (R3), each on its own server, the
 * third through a TCP proxy (helpers/tcp-proxy.ts) that is cut as a partition cuts (nothing gets
 * through either way, nothing is closed) for 6 s, past the node's heartbeats and its JetStream
 * requests' timeout (5 s), then healed; then its connections are closed and refused for 3 s. Every
 * acknowledged event must be in every node's history exactly once, nothing answered 4xx anywhere, and
 * every node must answer the same (helpers/cluster-load.ts).
 */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'cluster-partition-admin';

t.test(
  'a node cut off from NATS under load (6 s, then 3 s refused): every acknowledged event once everywhere, no 4xx left behind, the nodes agree',
  { skip, timeout: 150_000 },
  async (t) => {
    const nats = await startNats(3, { noAdvertise: true });
    t.teardown(() => nats.stop());
    const proxy = await startTcpProxy(Number(new URL(nats.urls[2] as string).port));
    t.teardown(() => proxy.close());
    const nodes = await startClusterNodes(t, nats, ['n1', 'n2', 'n3'], {
      adminKey: ADMIN,
      args: ['--heartbeat-ms', '100', '--missed-heartbeats', '4'],
      natsFor: (_id, i) => [i === 2 ? `nats://${proxy.address}` : (nats.urls[i] as string)],
    });
    const names = Array.from({ length: 9 }, (_, i) => `p${i}`);
    const orgId = await setUpLedger(nodes, ADMIN, names);

    const load = startLoad({ nodes, token: ADMIN, orgId, names, workersPerNode: 2, maxEvents: 12_000, maxMs: 90_000 });
    // Each phase after a heal lasts until the cut-off node acknowledges events again (a condition, not
    // a fixed time: a slow host waits longer, a fast one does not wait for nothing).
    const untilN3Serves = async (since: number, what: string) => {
      // (or the load has sent all it will: nothing more to wait for)
      await eventually(() => load.ended() || (load.acknowledged({ node: 2, since }) >= 20 && load.acknowledged({ since }) >= 60), {
        timeoutMs: 30_000,
        message: `n3 acknowledges events again ${what}`,
      });
      t.pass(
        load.ended()
          ? `the load ended (${load.sent()} events) before n3 was seen acknowledging events ${what}`
          : `n3 acknowledged events again ${what} within ${Date.now() - since} ms`,
      );
    };
    await eventually(() => [0, 1, 2].every((node) => load.acknowledged({ node }) >= 20), {
      timeoutMs: 30_000,
      message: 'every node acknowledges events under the load',
    });
    t.ok(proxy.connections > 0, `n3 reaches NATS through the proxy (${proxy.connections} connections)`);
    // A partition: nothing through, nothing closed; what n3 sent meanwhile arrives when it heals.
    let before = load.sent();
    proxy.cut('blackhole');
    await sleep(4_000);
    // (a balancer stops sending to a node that cannot commit: its /health says so)
    const cutOff = await call(nodes[2]?.url as string, 'GET', '/health');
    t.equal(cutOff.status, 503, `the cut-off node's /health answers 503 (${JSON.stringify(cutOff.body)})`);
    await sleep(2_000);
    proxy.heal();
    const duringBlackhole = load.sent() - before;
    await untilN3Serves(Date.now(), 'after the partition healed');
    // Then its connections are closed and refused for 3 s: n3 sees the disconnect and reconnects.
    before = load.sent();
    proxy.cut('reset');
    await sleep(3_000);
    proxy.heal();
    const duringReset = load.sent() - before;
    await untilN3Serves(Date.now(), 'after its connections were let through again');
    const report = await load.stop();
    t.comment(`${summary(report)}; ${duringBlackhole} sent while n3 was cut off, ${duringReset} while its connections were refused`);
    t.ok(report.count('ok') > 100, `${report.count('ok')} events acknowledged`);

    await untilNodesApplied(nats.urls, nodes, ADMIN);
    for (const node of nodes) {
      const health = await call(node.url, 'GET', '/health');
      t.equal(health.status, 200, `${node.url} healthy again (${JSON.stringify(health.body)})`);
    }
    await checkInvariants(t, { nodes, token: ADMIN, orgId, names, report });
    if (process.env.STATEHOLD_TEST_VERBOSE) for (const node of nodes) t.comment(node.output().slice(-6_000));
  },
);
