// What the cluster's forward hop costs (design.md §6.2, "a cheap forward hop"): CPU per request that
// one node forwards to an instance's owner over NATS request/reply (src/cluster/forwarder.ts), both
// sides together, with nothing else in the way: one nats-server, two Forwarders in one process, an
// owner side that answers at once with a realistic head (a context of ten fields, a snapshot, a timer).
//
//   node bench/probes/forward-hop.mjs [REPO_DIR,REPO_DIR,...] [ROUNDS]
//
// Each REPO_DIR is a built checkout (default: this one; old and new builds: `git worktree add`, with
// node_modules linked and `npm run build` run there); with several, they run in turn, round after
// round (ROUNDS, default 3), each round in a fresh child process on the same nats-server. Per round:
// FORWARD_HOP_WARMUP sends (default 2,000), then FORWARD_HOP_N sends (default 20,000) one at a time
// (C=1) and FORWARD_HOP_N at 64 in flight (C=64), all to instances the other node owns. The figure is
// process.cpuUsage() (user + system) of the process holding both nodes, per request; nats-server's
// own CPU is not in it. Prints medians over rounds and writes bench/results/forward-hop-<time>.json.
// FORWARD_HOP_NODE_ARGS: node options for the rounds' processes (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startNatsServers } from '../../cluster/nats-servers.mjs';
import { writeProbeReport } from '../lib/probe-report.mjs';

const here = fileURLToPath(new URL('../..', import.meta.url));
const N = Number(process.env.FORWARD_HOP_N ?? 20_000);
const WARMUP = Number(process.env.FORWARD_HOP_WARMUP ?? 2_000);

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/** One round in this process: the repo's Forwarder twice, on the NATS server at `url`. */
const round = async (repo, url) => {
  const load = (path) => import(pathToFileURL(resolve(repo, 'dist', path)).href);
  const { Forwarder } = await load('cluster/forwarder.js');
  const { ownerOf } = await load('cluster/rendezvous.js');
  const { partitionOf } = await load('domain/partitions.js');
  const { connect } = await import('@nats-io/transport-node');
  const members = ['n1', 'n2'];
  const count = 64;
  const context = {
    customerId: 'cus_4f9a2b7c1d',
    plan: 'pro',
    seats: 12,
    trialEndsAt: '2026-12-31T00:00:00.000Z',
    flags: { beta: true, darkMode: false },
    lastEvent: 'UPDATE',
    counter: 4217,
    tags: ['priority', 'emea'],
    notes: 'renewal call scheduled with the account owner',
    public: { status: 'active', seats: 12 },
  };
  const head = {
    orgId: 'org_2fK9sQ3xL8mN4pR7',
    machine: 'subscription',
    name: '',
    createdAt: '2026-11-28T10:00:00.000Z',
    versionId: 'ver_8sD2kF7gH1jL4zX9',
    status: 'running',
    seq: 4217,
    ts: 1_764_324_000_000,
    state: { active: 'billing' },
    context,
    tags: ['paid'],
    done: false,
    snapshot: JSON.stringify({
      status: 'active',
      historyValue: {},
      children: {},
      actions: [],
      activities: {},
      meta: {},
      events: [],
      configuration: ['subscription.active', 'subscription.active.billing'],
      transitions: [],
      changed: true,
      tags: ['paid'],
      done: false,
      _sessionid: null,
    }),
    pendingTimers: [
      {
        id: 'xstate.after(3600000)#subscription.active',
        dueAt: 1_764_327_600_000,
        event: { type: 'xstate.after(3600000)#subscription.active' },
      },
    ],
    stoppedChildren: [],
    timerAttempts: {},
    indexValues: { byCustomer: 'cus_4f9a2b7c1d' },
    logSeq: 981_223,
  };
  const event = { type: 'UPDATE', seats: 12, plan: 'pro', source: 'billing-webhook', at: '2026-11-28T10:00:00.000Z' };
  const authContext = { sub: 'user_7Hq2mZ', email: 'owner@example.com', org: 'acme', roles: ['admin'] };
  let ran = 0;
  const owner = {
    create: async (request) => ({ ...head, name: request.name }),
    read: async (_o, _m, name) => ({ ...head, name }),
    send: async (_o, _m, name) => (ran++, { ...head, name }),
    setStatus: async () => undefined,
    setTargetVersion: async () => undefined,
    delete: async () => true,
    fireTimers: async () => 'fired',
    receive: async () => undefined,
    whileDeletingMachine: (_o, _m, work) => work(),
    gateMachine: () => undefined,
  };
  const nodes = [];
  for (const id of members) {
    const nc = await connect({ servers: [url], name: id });
    const forwarder = new Forwarder(nc, owner, {
      cluster: 'bench',
      nodeId: id,
      members: () => members,
      partitions: {
        count,
        of: (orgId, machine, name) => partitionOf(orgId, machine, name, count),
        owner: (partition) => ownerOf(`partition/${partition}`, members),
      },
      reads: { head: () => undefined, history: () => [], listPart: async () => 'moved', queryPart: async () => 'moved' },
      timeoutMs: 10_000,
      onError: (message, error) => console.error(message, error),
    });
    forwarder.start();
    await nc.flush();
    nodes.push({ nc, forwarder });
  }
  const asker = nodes[0].forwarder;
  const names = [];
  for (let i = 0; names.length < 256; i++) if (asker.ownerOf(head.orgId, head.machine, `sub-${i}`) === 'n2') names.push(`sub-${i}`);
  const sendOne = async (i) => {
    const answer = await asker.send(head.orgId, head.machine, names[i % names.length], event, authContext);
    if (answer.context.counter !== 4217) throw new Error('unexpected answer');
  };
  const run = async (total, inFlight) => {
    let next = 0;
    const lane = async () => {
      while (next < total) await sendOne(next++);
    };
    await Promise.all(Array.from({ length: inFlight }, lane));
  };
  const measure = async (total, inFlight) => {
    const before = process.cpuUsage();
    const started = process.hrtime.bigint();
    await run(total, inFlight);
    const cpu = process.cpuUsage(before);
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    return {
      cpuUsPerRequest: +((cpu.user + cpu.system) / total).toFixed(1),
      userUsPerRequest: +(cpu.user / total).toFixed(1),
      requestsPerSecond: Math.round(total / (wallMs / 1000)),
    };
  };
  await run(WARMUP, 64);
  await run(WARMUP / 10, 1);
  const c1 = await measure(N, 1);
  const c64 = await measure(N, 64);
  if (ran !== 2 * N + WARMUP + WARMUP / 10) throw new Error(`the owner ran ${ran} sends`);
  for (const { nc, forwarder } of nodes) {
    forwarder.stop();
    await nc.close();
  }
  return { c1, c64 };
};

if (process.env.FORWARD_HOP_CHILD) {
  const { repo, url } = JSON.parse(process.env.FORWARD_HOP_CHILD);
  process.stdout.write(`${JSON.stringify(await round(repo, url))}\n`);
  process.exit(0);
}

const repos = (process.argv[2] ?? here).split(',').map((dir) => resolve(dir));
const ROUNDS = Number(process.argv[3] ?? 3);
const nats = await startNatsServers({ count: 1 });
const inChild = (repo) =>
  new Promise((resolvePromise, reject) => {
    const nodeArgs = (process.env.FORWARD_HOP_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, fileURLToPath(import.meta.url)], {
      cwd: here,
      env: { ...process.env, FORWARD_HOP_CHILD: JSON.stringify({ repo, url: nats.urls[0] }) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => (code === 0 ? resolvePromise(JSON.parse(out)) : reject(new Error(`round in ${repo} exited ${code}`))));
  });
const results = Object.fromEntries(repos.map((repo) => [repo, []]));
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const repo of repos) {
      const result = await inChild(repo);
      results[repo].push(result);
      console.log(
        `round ${r + 1} ${repo}: C=1 ${result.c1.cpuUsPerRequest} µs/request (${result.c1.requestsPerSecond}/s), C=64 ${result.c64.cpuUsPerRequest} µs/request (${result.c64.requestsPerSecond}/s)`,
      );
    }
  }
} finally {
  await nats.stop();
}
const medians = Object.fromEntries(
  repos.map((repo) => [
    repo,
    Object.fromEntries(
      ['c1', 'c64'].map((key) => [
        key,
        {
          cpuUsPerRequest: median(results[repo].map((result) => result[key].cpuUsPerRequest)),
          requestsPerSecond: median(results[repo].map((result) => result[key].requestsPerSecond)),
        },
      ]),
    ),
  ]),
);
console.log('medians (CPU µs per forwarded request, both nodes; requests per second):');
for (const [repo, m] of Object.entries(medians))
  console.log(
    `  ${repo}: C=1 ${m.c1.cpuUsPerRequest} µs (${m.c1.requestsPerSecond}/s), C=64 ${m.c64.cpuUsPerRequest} µs (${m.c64.requestsPerSecond}/s)`,
  );
console.log(writeProbeReport('forward-hop', { n: N, warmup: WARMUP, rounds: ROUNDS, results, medians }));
