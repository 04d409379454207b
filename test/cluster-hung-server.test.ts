/**
 * A nats-server that hangs (SIGSTOP: its process stopped, the TCP connections to it left open, as with
 * a frozen host or a link dead one way) under load. The two others keep a majority and elect new
 * leaders; the node attached to the hung server must notice (unanswered pings), move to another
 * server and serve again while the hung one is still stopped, not wait until it comes back. Then the
 * server goes on, and every invariant holds through every node.
 */
import t from 'tap';
import { callApi, checkInvariants, setUpLedger, startFaultCluster, startLoad, summary, untilNodesApplied } from './helpers/cluster-load.js';
import { eventually } from './helpers/eventually.js';
import { natsMissing, type NatsServers } from './helpers/nats.js';

const skip = natsMissing();
const ADMIN = 'hung-server-admin';

/** The index of the server the node named `nodeId` is connected to, by the servers' GET /connz (of those that answer). */
const serverOf = async (nats: NatsServers, nodeId: string): Promise<number | undefined> => {
  for (const [index, server] of nats.servers.entries()) {
    const connz = await fetch(`http://127.0.0.1:${server.httpPort}/connz`, { signal: AbortSignal.timeout(2_000) })
      .then((response) => response.json() as Promise<{ connections?: Array<{ name?: string }> }>)
      .catch(() => ({ connections: [] })); // (a stopped server does not answer)
    if ((connz.connections ?? []).some((c) => c.name?.endsWith(`-${nodeId}`))) return index;
  }
  return undefined;
};

t.test('a node whose nats-server hangs moves to another and serves while it is still stopped', { skip, timeout: 300_000 }, async (t) => {
  const { nats, nodes } = await startFaultCluster(t, ADMIN);
  const names = Array.from({ length: 9 }, (_, i) => `h${i}`);
  const orgId = await setUpLedger(nodes, ADMIN, names);
  // The other nodes' workers go on through the hang's first 8 s, then wait until the server goes on:
  // the load's count must not run out before n1 serves again, however long that takes.
  let holdOthersAfter = Infinity;
  const load = startLoad({
    nodes,
    token: ADMIN,
    orgId,
    names,
    workersPerNode: 2,
    maxEvents: 12_000,
    maxMs: 200_000,
    hold: (node) => node !== 0 && Date.now() > holdOthersAfter,
  });
  await eventually(() => [0, 1, 2].every((node) => load.acknowledged({ node }) >= 20), { timeoutMs: 30_000 });

  const hung = await serverOf(nats, 'n1');
  if (hung === undefined) throw new Error('n1 is connected to no server');
  nats.pause(hung);
  t.teardown(() => nats.resume(hung));
  const pausedAt = Date.now();
  holdOthersAfter = pausedAt + 8_000;
  // (what was answered just after the pause was under way before it)
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const since = Date.now();
  await eventually(() => load.acknowledged({ node: 0, since }) >= 20 || undefined, {
    timeoutMs: 90_000,
    message: `events through n1 acknowledged while nats-${hung + 1} is stopped`,
  });
  await eventually(async () => (await callApi(nodes[0]!.url, 'GET', '/health', '', { timeoutMs: 2_000 })).status === 200 || undefined, {
    timeoutMs: 20_000,
    message: `n1's /health 200 while nats-${hung + 1} is stopped`,
  });
  t.pass(`n1 served again within ${Date.now() - pausedAt} ms of nats-${hung + 1} stopping, while it is stopped`);
  t.not(await serverOf(nats, 'n1'), hung, 'n1 is on another server');

  holdOthersAfter = Infinity;
  nats.resume(hung);
  const resumedAt = Date.now();
  await eventually(() => load.ended() || [0, 1, 2].every((node) => load.acknowledged({ node, since: resumedAt }) >= 20) || undefined, {
    timeoutMs: 60_000,
    message: 'the load gets through every node after the server went on',
  });
  const report = await load.stop();
  t.comment(summary(report));
  await untilNodesApplied(nats.urls, nodes, ADMIN, 60_000);
  await checkInvariants(t, { nodes, token: ADMIN, orgId, names, report, usageOutages: 4 });
});
