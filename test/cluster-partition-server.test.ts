import t from 'tap';
import { connect } from '@nats-io/transport-node';
import { startNatsServers } from '../cluster/nats-servers.mjs';
import { callApi, checkInvariants, setUpLedger, startLoad, summary, untilNodesApplied } from './helpers/cluster-load.js';
import { eventually } from './helpers/eventually.js';
import { natsMissing, startClusterNodes } from './helpers/nats.js';
import { type CutMode, startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.js';

/**
 * A node and its nats-server cut off from the majority under load, then healed (design.md §6.2,
 * "Invariants to test"): three nats-servers (R3) whose routes to and from the third all go through TCP
 * proxies (cluster/nats-servers.mjs routeVia; each server's /routez is checked to say so), nodes n1, n2,
 * n3 each on its own server only. Under load through every node, all of server 3's routes are cut three
 * times, each time healed and the nodes let settle: `blackhole` (nothing through either way, nothing
 * closed) for 8 s while server 1 leads the TX log, past the nodes' heartbeats and their JetStream
 * requests' timeout; `blackhole` for 11 s while server 3 leads it, past the majority's election of
 * another leader (4 to 9 s); `reset` (closed and refused) for 6 s while server 2 leads it. During each
 * cut n3's GET /health must come to answer 503 (it cannot commit) while n1's and n2's answer 200 (a cut
 * lasts on, up to MAJORITY_WAIT_MS, until they do: a busy host elects a new leader later). Then
 * every acknowledged event must be in every node's history exactly once, nothing answered 4xx anywhere,
 * and every node must answer the same histories, heads and usage (helpers/cluster-load.ts).
 */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'cluster-partition-server-admin';
/** Server 3, and node n3 on it, by index. */
const CUT = 2;
const HEALTH_EVERY_MS = 250;
/**
 * When server 3 leads the TX log, it goes on naming itself leader through the cut (a 2.9 server checks
 * its quorum every 10 s): n3 tells it cannot commit by the replicas its leader has not heard from
 * (transition-log.ts unwritable: 3 s of silence), so its /health turns 503 a few seconds later than
 * when another server leads (then its requests time out at once).
 */
const LEADER_CUT_NOTICE_MS = 6_000;
/**
 * When another server leads it: n3's probe runs every second and asks the log's info (1.5 s at most),
 * then reads its last entry (1.5 s, and up to 1.55 s more while a server answers "temporarily
 * unavailable": stream-gets.ts). A reset cut, whose reconnects answer at once, was noticed at 3.28 s in
 * a clean-clone CI run on a loaded host, and answered 200 at 3.02 s.
 */
const CUT_NOTICE_MS = 4_500;
/**
 * How much longer than planned a cut lasts while n1's and n2's /health do not both answer 200: when the
 * cut server led a stream, the majority serves again once JetStream elected another leader (4 to 9 s),
 * which takes longer on a busy host (a clean-clone CI run with three test files at a time saw none
 * within a 6 s cut). The cut waits for it, a bounded time, rather than bet on the scheduler.
 */
const MAJORITY_WAIT_MS = 20_000;

interface RouteProxy {
  from: number;
  to: number;
  proxy: TcpProxy;
}

interface Routez {
  server_id: string;
  routes?: Array<{ remote_id: string; port: number }>;
}

type Servers = Awaited<ReturnType<typeof startNatsServers>>;

const getJson = async (url: string): Promise<any> => {
  const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
  return response.json();
};

/**
 * What is wrong with the routes, [] when every pair of servers has one route and each touching server 3
 * goes through a proxy: on one route the side that dialed sees the far end at the port it dialed, so one
 * of the two sides must see its proxy's port (a route dialed straight, as one learnt by gossip, shows the
 * other server's own route port on one side and a port of the kernel's on the other).
 */
const routeProblems = async (nats: Servers, proxies: RouteProxy[]): Promise<string[]> => {
  const routez: Routez[] = [];
  for (const server of nats.servers) routez.push((await getJson(`http://127.0.0.1:${server.httpPort}/routez`)) as Routez);
  const problems: string[] = [];
  const portSeen = (from: number, to: number): number[] =>
    (routez[from]?.routes ?? []).filter((route) => route.remote_id === routez[to]?.server_id).map((route) => route.port);
  for (let i = 0; i < routez.length; i++) {
    for (let j = i + 1; j < routez.length; j++) {
      const [atI, atJ] = [portSeen(i, j), portSeen(j, i)];
      if (atI.length !== 1 || atJ.length !== 1) {
        problems.push(`servers ${i + 1} and ${j + 1}: ${atI.length} and ${atJ.length} routes`);
        continue;
      }
      if (i !== CUT && j !== CUT) continue;
      const via = (from: number, to: number) => proxies.find((p) => p.from === from && p.to === to)?.proxy.port;
      if (atI[0] !== via(i, j) && atJ[0] !== via(j, i))
        problems.push(
          `servers ${i + 1} and ${j + 1}: not through a proxy (ports seen ${atI[0]} and ${atJ[0]}, proxies ${via(i, j)} and ${via(j, i)})`,
        );
    }
  }
  return problems;
};

const untilRoutesThroughProxies = async (nats: Servers, proxies: RouteProxy[], withinMs = 20_000): Promise<string[]> => {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const problems = await routeProblems(nats, proxies).catch((error: Error) => [`routez: ${error.message}`]);
    if (problems.length === 0 || Date.now() > deadline) return problems;
    await sleep(250);
  }
};

interface Leaders {
  /** Every stream's leader and the meta leader, as server 1 sees them (for the test's output). */
  text: string;
  /** The TX log's stream, and the server that leads it ('nats-1'…), if any. */
  tx: { name: string; leader: string | undefined } | undefined;
  /** The server that leads the META log, if any. */
  meta: string | undefined;
}

const leadersNow = async (nats: Servers): Promise<Leaders> => {
  try {
    const jsz = await getJson(`http://127.0.0.1:${nats.servers[0]?.httpPort}/jsz?accounts=true&streams=true`);
    const streams: Array<{ name: string; cluster?: { leader?: string } }> = (jsz.account_details ?? []).flatMap(
      (account: any) => account.stream_detail ?? [],
    );
    const tx = streams.find((stream) => stream.name.endsWith('_TX'));
    const meta = streams.find((stream) => stream.name.endsWith('_META'));
    return {
      meta: meta?.cluster?.leader,
      text: [`meta ${jsz.meta_cluster?.leader ?? '-'}`, ...streams.map((stream) => `${stream.name} ${stream.cluster?.leader ?? '-'}`)].join(
        ', ',
      ),
      tx: tx && { name: tx.name, leader: tx.cluster?.leader },
    };
  } catch (error) {
    return { text: `(jsz: ${error instanceof Error ? error.message : String(error)})`, tx: undefined, meta: undefined };
  }
};

/**
 * Makes server `index` (0-based) the TX log's leader, by asking whoever leads it to step down until it
 * is (each step down elects one of the others); resolves with the leader it got to.
 */
const steerTxLeader = async (nats: Servers, index: number): Promise<string | undefined> => {
  const wanted = nats.servers[index]?.name;
  const nc = await connect({ servers: nats.urls[0] as string, name: 'steer' });
  try {
    let leader: string | undefined;
    for (let attempt = 0; attempt < 12; attempt++) {
      // (until the stream has a leader again after the last step down)
      const deadline = Date.now() + 10_000;
      let tx = (await leadersNow(nats)).tx;
      while (!tx?.leader && Date.now() < deadline) {
        await sleep(200);
        tx = (await leadersNow(nats)).tx;
      }
      leader = tx?.leader;
      if (!tx || leader === wanted) return leader;
      await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${tx.name}`, undefined, { timeout: 5_000 }).catch(() => undefined);
      await sleep(500);
    }
    return leader;
  } finally {
    await nc.close();
  }
};

t.test(
  'a node and its nats-server cut off from the majority under load (blackholed 8 s, and 11 s while its server leads the log, then reset 6 s), then healed: every acknowledged event once everywhere, no 4xx left behind, the nodes agree',
  { skip, timeout: 300_000 },
  async (t) => {
    const proxies: RouteProxy[] = [];
    t.teardown(async () => {
      for (const { proxy } of proxies) await proxy.close();
    });
    const nats = await startNatsServers({
      count: 3,
      noAdvertise: true,
      routeVia: async (from, to, routePort) => {
        if (from !== CUT && to !== CUT) return routePort;
        const proxy = await startTcpProxy(routePort);
        proxies.push({ from, to, proxy });
        return proxy.port;
      },
    });
    t.teardown(() => nats.stop());
    t.equal(proxies.length, 4, 'server 3 dials servers 1 and 2, and they dial it, through proxies');
    t.same(await untilRoutesThroughProxies(nats, proxies), [], 'every route to and from server 3 goes through a proxy (/routez)');

    const nodes = await startClusterNodes(t, nats, ['n1', 'n2', 'n3'], {
      adminKey: ADMIN,
      args: ['--heartbeat-ms', '100', '--missed-heartbeats', '4'],
      natsFor: (_id, i) => [nats.urls[i] as string],
    });
    let threw = false;
    try {
      await partitionUnderLoad();
    } catch (error) {
      threw = true;
      throw error;
    } finally {
      if (threw || !t.passing() || process.env.STATEHOLD_TEST_VERBOSE) {
        for (const [i, node] of nodes.entries()) t.comment(`n${i + 1}:\n${node.output().slice(-12_000)}`);
        t.comment(`nats-3:\n${nats.servers[CUT]?.output.slice(-6_000)}`);
      }
    }

    async function partitionUnderLoad() {
      const names = Array.from({ length: 9 }, (_, i) => `p${i}`);
      const orgId = await setUpLedger(nodes, ADMIN, names);
      // What the nodes' /health gave as the reason they could not serve (for the test's output), by node.
      let reasons: Array<Set<string>> = nodes.map(() => new Set());
      const healthOf = async (i: number): Promise<number> => {
        const { status, body } = await callApi(nodes[i]?.url as string, 'GET', '/health', ADMIN, { timeoutMs: 1_000 });
        if (status !== 200) reasons[i]?.add(String(body?.reason ?? body?.error ?? status).slice(0, 160));
        return status;
      };
      const untilHealthy = async (withinMs: number): Promise<number[]> => {
        const deadline = Date.now() + withinMs;
        for (;;) {
          const statuses = await Promise.all(nodes.map((_, i) => healthOf(i)));
          if (statuses.every((status) => status === 200) || Date.now() > deadline) return statuses;
          await sleep(250);
        }
      };
      const reasonsText = () =>
        reasons
          .map((seen, i) => (seen.size > 0 ? `n${i + 1}: ${[...seen].join(' | ')}` : ''))
          .filter(Boolean)
          .join('; ') || 'none';
      t.same(await untilHealthy(20_000), [200, 200, 200], 'every node healthy before the load');

      const load = startLoad({ nodes, token: ADMIN, orgId, names, workersPerNode: 2, maxEvents: 12_000, maxMs: 120_000 });
      const notes: string[] = [];
      /**
       * Makes server `txLeader` (0-based) lead the TX log, cuts every route of server 3 for `ms` (sampling
       * the nodes' /health meanwhile), heals, and waits for the routes (through their proxies again) and
       * for every node to be healthy.
       */
      const round = async (mode: CutMode, ms: number, txLeader: number) => {
        const steered = await steerTxLeader(nats, txLeader);
        const before = load.sent();
        const leaders = await leadersNow(nats);
        const label = `${mode} ${ms / 1000} s, the TX log led by ${leaders.tx?.leader ?? 'none'}`;
        // (how long n3 may take to notice: longer when its own server leads the log: LEADER_CUT_NOTICE_MS)
        const noticeMs = leaders.tx?.leader === nats.servers[CUT]?.name ? LEADER_CUT_NOTICE_MS : CUT_NOTICE_MS;
        reasons = nodes.map(() => new Set());
        for (const { proxy } of proxies) proxy.cut(mode);
        const cutAt = Date.now();
        // (each sample: ms into the cut, and the three nodes' /health statuses)
        const samples: Array<{ at: number; statuses: number[] }> = [];
        const majorityServes = () =>
          samples
            .at(-1)
            ?.statuses.slice(0, 2)
            .every((status) => status === 200) === true;
        while (Date.now() - cutAt < ms || (!majorityServes() && Date.now() - cutAt < ms + MAJORITY_WAIT_MS)) {
          const at = Date.now() - cutAt;
          samples.push({ at, statuses: await Promise.all(nodes.map((_, i) => healthOf(i))) });
          await sleep(Math.max(0, HEALTH_EVERY_MS - (Date.now() - cutAt - at)));
        }
        const cutMs = Date.now() - cutAt;
        for (const { proxy } of proxies) proxy.heal();
        const healedAt = Date.now();
        const sentDuring = load.sent() - before;
        const reasonsInCut = reasonsText();
        reasons = nodes.map(() => new Set());
        // The changes only: "at ms: n1 n2 n3".
        const timeline = samples
          .filter((sample, k) => k === 0 || sample.statuses.join() !== samples[k - 1]?.statuses.join())
          .map((sample) => `${sample.at}: ${sample.statuses.join(' ')}`)
          .join('; ');
        const partitioned = samples.filter(({ statuses: [a, b, c] }) => a === 200 && b === 200 && c === 503);
        const last = samples.at(-1)?.statuses ?? [];
        // The majority's nodes: they can commit again once servers 1 and 2 have a leader for the log
        // (at once, or after an election when server 3 led it: JetStream's election timeout is 4 to 9 s).
        t.same(last.slice(0, 2), [200, 200], `${label}: at the end of the cut (${cutMs} ms) n1's and n2's /health answer 200`);
        // The cut-off node cannot commit: its /health must say so by the end of the cut.
        t.equal(last[CUT], 503, `${label}: at the end of the cut n3's /health answers 503`);
        t.ok(
          partitioned.length > 0,
          `${label}: during the cut n3's /health answers 503 while n1's and n2's answer 200 (${partitioned.length} of ${samples.length} samples, from ${partitioned[0]?.at ?? '-'} ms)`,
        );
        const n3Served = samples.filter((sample) => sample.at > noticeMs && sample.statuses[CUT] === 200).map((sample) => sample.at);
        t.same(n3Served, [], `${label}: past the cut's first ${noticeMs / 1000} s n3's /health never answers 200`);
        t.same(
          await untilRoutesThroughProxies(nats, proxies),
          [],
          `${label}: healed, every route to and from server 3 again through a proxy`,
        );
        t.same(await untilHealthy(60_000), [200, 200, 200], `${label}: healed, every node healthy again`);
        notes.push(
          `${label} (steered to ${steered}; cut for ${cutMs} ms): leaders at the cut: ${leaders.text}; /health (n1 n2 n3) ${timeline}; healthy ${Date.now() - healedAt} ms after the heal; ${sentDuring} sent during the cut; why not healthy during the cut: ${reasonsInCut}; after the heal: ${reasonsText()}`,
        );
      };

      // Before the first cut the load goes on until every node acknowledged events; between the cuts
      // (every node healthy again) and after the last, until it got this many more through: conditions,
      // not fixed times (a slow host waits longer, a fast one not for nothing). (Not every node after a
      // heal: a worker whose request was sent into the cut waits out its timeout first.)
      const untilServed = async (what: string, everyNode: boolean) => {
        const since = Date.now();
        await eventually(
          () =>
            load.ended() ||
            ((!everyNode || nodes.every((_, node) => load.acknowledged({ node, since }) >= 20)) && load.acknowledged({ since }) >= 60),
          { timeoutMs: 30_000, message: `the load gets events acknowledged ${what}` },
        );
        t.pass(`events acknowledged ${what}${everyNode ? ' through every node' : ''}, within ${Date.now() - since} ms`);
      };
      await untilServed('before the first cut', true);
      await round('blackhole', 8_000, 0);
      await untilServed('after the first heal', false);
      // (past the majority's election: up to 9 s)
      await round('blackhole', 11_000, CUT);
      await untilServed('after the second heal', false);
      await round('reset', 6_000, 1);
      await untilServed('after the third heal', false);
      const report = await load.stop();
      for (const note of notes) t.comment(note);
      t.comment(summary(report));
      t.ok(report.count('ok') > 100, `${report.count('ok')} events acknowledged`);
      for (let i = 0; i < nodes.length; i++)
        t.ok(
          report.events.some((event) => event.node === i && event.outcome === 'ok'),
          `n${i + 1} acknowledged events`,
        );

      await untilNodesApplied(nats.urls, nodes, ADMIN, 60_000);
      // (three cuts: each may take the META log away from a node once while cut and once as it heals)
      await checkInvariants(t, {
        nodes,
        token: ADMIN,
        orgId,
        names,
        report,
        usageOutages: 6,
        // (a server cut off while it led the META log can keep other entries than the leader's at some
        // positions, Debian's nats-server 2.9.10: cluster/README.md, What is left, 13; the usage, carried
        // with each run's totals, is the same on every node all the same)
      });

      // For the output: each node's usage and how far it applied the META log, until they agree (30 s at most).
      const usageNow = async () => {
        const jsz = await getJson(`http://127.0.0.1:${nats.servers[0]?.httpPort}/jsz?accounts=true&streams=true`).catch(() => undefined);
        const meta = (jsz?.account_details ?? [])
          .flatMap((account: any) => account.stream_detail ?? [])
          .find((stream: any) => stream.name.endsWith('_META'));
        const views = await Promise.all(
          nodes.map(async (node) => {
            const usage = await callApi(node.url, 'GET', '/usage', ADMIN, { orgId, timeoutMs: 2_000 });
            const cluster = await callApi(node.url, 'GET', '/cluster', ADMIN, { timeoutMs: 2_000 });
            const transitions = (usage.body?.usage?.[0]?.machines as Array<{ machine: string; transitions: number }> | undefined)?.find(
              (m) => m.machine === 'ledger',
            )?.transitions;
            return { transitions, meta: cluster.body?.appliedSeq?.meta };
          }),
        );
        return {
          same: views.every((view) => view.transitions === views[0]?.transitions),
          text: `${views.map((view, i) => `n${i + 1} ${view.transitions} (META applied to ${view.meta})`).join(', ')}; META last ${meta?.state?.last_seq}`,
        };
      };
      const firstUsage = await usageNow();
      let lastUsage = firstUsage;
      const usageFrom = Date.now();
      while (!lastUsage.same && Date.now() - usageFrom < 30_000) {
        await sleep(1_000);
        lastUsage = await usageNow();
      }
      t.comment(
        `usage after the checks: ${firstUsage.text}${firstUsage.same ? '' : `; ${lastUsage.same ? 'the same' : 'still not the same'} ${((Date.now() - usageFrom) / 1000).toFixed(1)} s later: ${lastUsage.text}`}`,
      );
    }
  },
);
