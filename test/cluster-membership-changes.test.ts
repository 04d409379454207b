import t, { type Test } from 'tap';
import { checkInvariants, type LoadReport, setUpLedger, untilNodesApplied } from './helpers/cluster-load.js';
import {
  clusterView,
  latencies,
  listThrough,
  loadLine,
  type MembershipLoadReport,
  startMembershipLoad,
  untilReady,
} from './helpers/membership-load.js';
import { eventually } from './helpers/eventually.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';
import { type NodeProcess, removeDir, tempDataDir } from './helpers/node-process.js';

/**
 * Joining and leaving without a stall (design.md §6, §6.2): three nodes on a 3-server NATS (R3) under a
 * bounded closed-loop load of creates and sends through every node; a fourth node joins (it catches up
 * what it is to own, then owns it), then one node leaves with SIGTERM (it keeps answering while the
 * others catch its share up), then that node starts again on its data dir and joins. After each change,
 * with the load stopped: no request failed (each answer 2xx, or the 400/403 the ledger gives BOOM and
 * DENY), no request slow, every acknowledged event (of every phase so far) in its history exactly once
 * and the same through every node, the same lists through every node, and each instance held by one
 * node only (helpers/cluster-load.ts, helpers/membership-load.ts).
 */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'cluster-membership-changes-admin';
/**
 * The slowest request a membership change may cause. The aim is none over AIM_MS; on a busy 2-core host
 * a node that just started answers its first requests of the instances it took in 0.6 to 1.9 s (its
 * sandbox worker boots and loads the machine's code once it listens, after it said it was ready), so the
 * assertion is looser: it catches a stall that waits out a timeout (the 5 s move window, the 10 s
 * catch-up wait or leave wait), and a slowest request over the aim is reported.
 */
const MAX_LATENCY_MS = 5_000;
const AIM_MS = 1_000;
/**
 * Before a change, and once the cluster settled after it, the load goes on until every node in the
 * cluster acknowledged this many requests sent since (and all of them together ACKED_IN_ALL): a
 * condition, not a fixed time, so a loaded host waits longer and an idle one does not wait for nothing.
 */
const ACKED_PER_NODE = 20;
const ACKED_IN_ALL = 100;

t.test(
  'a node joins, one leaves with SIGTERM and starts again, all under load: no failed request, no stall, nothing lost',
  { skip, timeout: 170_000 },
  async (t) => {
    const nats = await startNats(3);
    t.teardown(() => nats.stop());
    const dirs = new Map<string, string>();
    const dataDirFor = (id: string): string => {
      const dir = dirs.get(id) ?? tempDataDir();
      dirs.set(id, dir);
      return dir;
    };
    const started: NodeProcess[] = [];
    t.teardown(async () => {
      for (const node of started) await node.stop('SIGKILL');
      for (const dir of dirs.values()) removeDir(dir);
    });
    const start = async (id: string): Promise<NodeProcess> => {
      const [node] = await startClusterNodes(t, nats, [id], { adminKey: ADMIN, dataDirFor });
      started.push(node as NodeProcess);
      return node as NodeProcess;
    };
    /** The nodes in the cluster now, by id. */
    const live = new Map<string, NodeProcess>();
    for (const id of ['n1', 'n2', 'n3']) live.set(id, await start(id));

    const names = Array.from({ length: 9 }, (_, i) => `m${i}`);
    const orgId = await setUpLedger([...live.values()], ADMIN, names);
    await untilNodesApplied(nats.urls, [...live.values()], ADMIN);
    const reports: MembershipLoadReport[] = [];
    const load = (prefix: string) => {
      const running = startMembershipLoad({
        token: ADMIN,
        orgId,
        names: [...names, ...reports.flatMap((report) => report.created)],
        prefix,
        workersPerNode: 2,
        createEvery: 5,
        maxCreates: 30,
        maxRequests: 20_000,
        maxMs: 40_000,
      });
      for (const [id, node] of live) running.add({ id, url: node.url });
      return running;
    };

    const untilServed = async (t: Test, running: ReturnType<typeof load>, since: number, what: string) => {
      const enough = () =>
        [...live.keys()].every((node) => running.acknowledged({ node, since }) >= ACKED_PER_NODE) &&
        running.acknowledged({ since }) >= ACKED_IN_ALL;
      await eventually(enough, { timeoutMs: 30_000, message: `every node acknowledges requests ${what}` });
      t.pass(`every node (${[...live.keys()].join(', ')}) acknowledged requests ${what}, within ${Date.now() - since} ms`);
    };

    /** What must hold once the load of a phase stopped (and of every phase before it). */
    const check = async (t: Test, phase: string, report: MembershipLoadReport) => {
      reports.push(report);
      t.comment(loadLine(phase, report));
      const unexpected = report.answers.filter((answer) => !answer.expected && !answer.leaving);
      t.same(
        unexpected.slice(0, 10).map(({ kind, node, status, at, code, message }) => ({ kind, node, status, at, code, message })),
        [],
        `${phase}: every answer 2xx, or the 400/403 of BOOM and DENY (${unexpected.length} others)`,
      );
      t.ok(report.count('ok') > 100, `${phase}: ${report.count('ok')} events acknowledged`);
      const { max } = latencies(report.answers);
      t.ok(max < MAX_LATENCY_MS, `${phase}: the slowest request took ${max.toFixed(0)} ms (under ${MAX_LATENCY_MS} ms)`);
      if (max >= AIM_MS) t.comment(`${phase}: the slowest request (${max.toFixed(0)} ms) is over the aim of ${AIM_MS} ms`);

      const nodes = [...live.values()];
      await untilNodesApplied(nats.urls, nodes, ADMIN);
      const all = [...names, ...reports.flatMap((each) => each.created)].sort();
      const merged: LoadReport = {
        events: reports.flatMap((each) => each.events),
        startedAt: reports[0]?.startedAt ?? 0,
        endedAt: report.endedAt,
        count: (outcome) => reports.reduce((sum, each) => sum + each.count(outcome), 0),
      };
      t.comment(
        `${phase}: checking ${merged.events.length} events of ${reports.length} phases on ${all.length} instances through ${[...live.keys()].join(', ')}`,
      );
      await checkInvariants(t, { nodes, token: ADMIN, orgId, names: all, report: merged });
      for (const [id, node] of live)
        t.same(await listThrough(node.url, ADMIN, orgId), all, `${phase}: ${id} lists every instance, in order`);
      const views = await Promise.all(nodes.map((node) => clusterView(node.url, ADMIN)));
      const held = views.map((view) => view?.heldInstances ?? -1);
      t.equal(
        held.reduce((sum, count) => sum + count, 0),
        all.length,
        `${phase}: each of the ${all.length} instances held by one node only (${[...live.keys()].map((id, i) => `${id} ${held[i]}`).join(', ')})`,
      );
      t.ok(
        held.every((count) => count < all.length),
        `${phase}: no node holds them all`,
      );
      // Nothing else is kept: a partition given up (or held before a restart and not now) is dropped.
      let stored: number[] = [];
      for (let i = 0; i < 50; i++) {
        stored = (await Promise.all([...live.values()].map((node) => clusterView(node.url, ADMIN)))).map(
          (view) => view?.storedInstances ?? -1,
        );
        if (stored.reduce((sum, count) => sum + count, 0) === all.length) break;
        await sleep(200);
      }
      t.equal(
        stored.reduce((sum, count) => sum + count, 0),
        all.length,
        `${phase}: each node stores only what it holds (${[...live.keys()].map((id, i) => `${id} ${stored[i]}`).join(', ')})`,
      );
    };

    await t.test('a fourth node joins under load', async (t) => {
      const running = load('join');
      await untilServed(t, running, running.startedAt, 'before the change');
      const joining = Date.now();
      const n4 = await start('n4');
      const listening = Date.now() - joining;
      live.set('n4', n4);
      running.add({ id: 'n4', url: n4.url });
      await untilReady(n4.url, ADMIN);
      const ready = Date.now() - joining;
      await untilNodesApplied(nats.urls, [...live.values()], ADMIN);
      t.comment(
        `n4 started at ${((joining - running.startedAt) / 1000).toFixed(2)} s of the load, listened ${listening} ms later, ready by ${ready} ms, seen by all by ${Date.now() - joining} ms`,
      );
      await untilServed(t, running, Date.now(), 'once the cluster settled after the change');
      await check(t, 'join', await running.stop());
    });

    await t.test('a node leaves with SIGTERM under load', async (t) => {
      const running = load('leave');
      await untilServed(t, running, running.startedAt, 'before the change');
      const leaver = live.get('n2') as NodeProcess;
      running.leaving('n2');
      const sigterm = Date.now();
      t.comment(`SIGTERM to n2 at ${((sigterm - running.startedAt) / 1000).toFixed(2)} s of the load`);
      const exited = leaver.stop('SIGTERM');
      const code = await exited;
      const tookMs = Date.now() - sigterm;
      running.retire('n2');
      live.delete('n2');
      t.equal(code, 0, `n2 exited cleanly, ${tookMs} ms after SIGTERM`);
      t.notMatch(leaver.output(), /did not catch up this node's share/, "the others caught n2's share up before it left");
      await untilNodesApplied(nats.urls, [...live.values()], ADMIN);
      await untilServed(t, running, Date.now(), 'once the cluster settled after the change');
      const report = await running.stop();
      const sinceSigterm = sigterm - report.startedAt;
      const answeredWhileDraining = report.answers.filter(
        (answer) => answer.node === 'n2' && answer.at >= sinceSigterm && answer.expected,
      ).length;
      const refused = report.answers.filter((answer) => answer.leaving);
      t.comment(
        `n2 answered ${answeredWhileDraining} requests sent after its SIGTERM; refused ${refused.length} as it closed (${refused.map((answer) => `${answer.status} at ${((answer.at - sinceSigterm) / 1000).toFixed(2)} s`).join(', ')})`,
      );
      t.ok(answeredWhileDraining > 0, 'n2 kept answering while it drained');
      await check(t, 'leave', report);
    });

    await t.test('the node that left starts again on its data dir and joins under load', async (t) => {
      const running = load('restart');
      await untilServed(t, running, running.startedAt, 'before the change');
      const joining = Date.now();
      const again = await start('n2');
      const listening = Date.now() - joining;
      t.comment(`n2 started again at ${((joining - running.startedAt) / 1000).toFixed(2)} s of the load`);
      live.set('n2', again);
      running.add({ id: 'n2', url: again.url });
      await untilReady(again.url, ADMIN);
      await untilNodesApplied(nats.urls, [...live.values()], ADMIN);
      t.comment(`n2 listened again ${listening} ms after it was started, seen ready by all by ${Date.now() - joining} ms`);
      await untilServed(t, running, Date.now(), 'once the cluster settled after the change');
      await check(t, 'restart', await running.stop());
    });
    if (process.env.STATEHOLD_TEST_VERBOSE) for (const node of started) t.comment(node.output().slice(-6_000));
  },
);
