// What an event costs when its instance holds a large context and the event changes a small part of
// it (a cart of many lines, one line's quantity changed): the server's CPU per event (the node and its
// sandbox worker) and the bytes written per event: what the host's disks took (/proc/diskstats, whole
// disks: the write-ahead log, LMDB and the file system's journal; anything else the host writes
// meanwhile too, so run it on a quiet host), and what the server passed to write system calls of every
// kind (/proc/<pid>/io `wchar`: the log, LMDB, the sockets and the worker's pipe), at 64 events in
// flight and one at a time, through HTTP with a production key's token as an application's backend
// sends them. (`write_bytes` of /proc/<pid>/io is not used: here it counted ≈ 1 MB per event at C=1
// where the disk took 13 KB.)
//
//   node --no-node-snapshot bench/probes/large-context.mjs [REPO_DIR,REPO_DIR,...] [ROUNDS]
//
// Each REPO_DIR is a built checkout (default: this one); with several, their servers run in turn,
// round after round, the order reversed every other round (old and new builds: `git worktree add`,
// node_modules linked, `npm run build` there). LARGE_CONTEXT_KB (default 20): the context's size;
// LARGE_CONTEXT_N instances (default 200); LARGE_CONTEXT_C64 and LARGE_CONTEXT_C1 events (defaults
// 4,000 and 400) after LARGE_CONTEXT_WARMUP at C=64 (default 2,000). Prints each run and the medians
// over rounds; writes bench/results/large-context-<time>.json.
import { StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { authHeaders, makePool, request } from '../lib/http.mjs';
import { alternatingRounds, writeProbeReport } from '../lib/probe-report.mjs';
import { family } from '../lib/proc-sampler.mjs';
import { startServer } from '../lib/server-process.mjs';
import { summarize } from '../lib/stats.mjs';

const here = fileURLToPath(new URL('../..', import.meta.url));
const repos = (process.argv[2] ?? here).split(',').map((dir) => resolve(dir));
const ROUNDS = Number(process.argv[3] ?? 2);
const KB = Number(process.env.LARGE_CONTEXT_KB ?? 20);
const N = Number(process.env.LARGE_CONTEXT_N ?? 200);
const C64 = Number(process.env.LARGE_CONTEXT_C64 ?? 4_000);
const C1 = Number(process.env.LARGE_CONTEXT_C1 ?? 400);
const WARMUP = Number(process.env.LARGE_CONTEXT_WARMUP ?? 2_000);
const CAP_MS = 60_000;
/** Each line is ≈ 100 bytes of JSON. */
const LINES = Math.max(1, Math.round((KB * 1024) / 100));

const CART = `import { createMachine, assign } from 'xstate';
const lines = Array.from({ length: ${LINES} }, (_, i) => ({ sku: 'sku-' + String(i).padStart(6, '0'), title: 'An item of the catalogue, number ' + i, qty: 1 }));
export default createMachine({ id: 'cart', predictableActionArguments: true, initial: 'open', context: { lines, changes: 0 },
  states: { open: { on: { SET: { actions: assign({
    lines: (c, e) => c.lines.map((line, i) => (i === e.line ? { ...line, qty: e.qty } : line)),
    changes: (c) => c.changes + 1,
  }) } } } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

/** Bytes written to the host's whole disks (not their partitions) since boot. */
const diskBytes = () =>
  readFileSync('/proc/diskstats', 'utf8')
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => /^(?:[sv]d[a-z]+|xvd[a-z]+|nvme\d+n\d+)$/.test(fields[2]))
    .reduce((sum, fields) => sum + Number(fields[9]) * 512, 0);

/** CPU seconds of the server and its sandbox workers; bytes written by the host's disks and by the server's system calls. */
const readCounters = (pid) => {
  let cpu = 0;
  for (const member of family(pid)) {
    try {
      const stat = readFileSync(`/proc/${member}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      cpu += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      // gone meanwhile
    }
  }
  const io = Object.fromEntries(
    readFileSync(`/proc/${pid}/io`, 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split(': '))
      .map(([k, v]) => [k, Number(v)]),
  );
  return { cpu, disk: diskBytes(), wchar: io.wchar };
};

/** `count` SET events over the instances, `concurrency` in flight, each instance one at a time. */
const drive = async (pool, headers, names, count, concurrency, pid) => {
  const latencies = [];
  let next = 0;
  const before = pid === undefined ? undefined : readCounters(pid);
  const started = performance.now();
  const worker = async (w) => {
    const own = names.filter((_, i) => i % concurrency === w);
    for (let k = 0; ; k++) {
      if (next >= count || performance.now() - started > CAP_MS) return;
      const n = next++;
      const name = own[k % own.length];
      const t0 = performance.now();
      const answer = await request(pool, 'POST', `/machines/cart/i/${name}/events`, headers, {
        event: { type: 'SET', line: n % LINES, qty: 1 + (n % 7) },
      });
      if (answer.status !== 200) throw new Error(`SET to ${name}: ${answer.status} ${answer.error ?? answer.text}`);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const wallS = (performance.now() - started) / 1000;
  const { p50, p99 } = summarize(latencies);
  const figures = { events: latencies.length, perS: Math.round(latencies.length / wallS), p50, p99 };
  if (before === undefined) return figures;
  const after = readCounters(pid);
  const per = (a, b) => Math.round((a - b) / latencies.length);
  return {
    ...figures,
    cpuUsPerEvent: Math.round(((after.cpu - before.cpu) * 1e6) / latencies.length),
    diskBytesPerEvent: per(after.disk, before.disk),
    syscallBytesPerEvent: per(after.wchar, before.wchar),
  };
};

const runOnce = async (repoRoot, round) => {
  const adminKey = `bench-large-context-${Date.now()}`;
  const server = await startServer({ repoRoot, adminKey, label: `large-context-${round}` });
  try {
    const client = new StateBackedClient(adminKey, { apiHost: server.url });
    await client.machines.create('cart');
    await client.machineVersions.create('cart', { clientInfo: 'bench', makeCurrent: true, code: CART });
    const key = await client.keys.create({ name: 'bench', use: 'production' });
    const token = await signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: 'bench' }, { expires: { in: '2h' } });
    const headers = authHeaders(token);
    const pool = makePool(server.url, 64);
    const names = Array.from({ length: N }, (_, i) => `c${i}`);
    for (let i = 0; i < N; i += 16) {
      await Promise.all(
        names.slice(i, i + 16).map(async (slug) => {
          const answer = await request(pool, 'POST', '/machines/cart', headers, { slug });
          if (answer.status !== 200) throw new Error(`create ${slug}: ${answer.status} ${answer.error ?? answer.text}`);
        }),
      );
    }
    await drive(pool, headers, names, WARMUP, 64);
    await drive(pool, headers, names, WARMUP / 10, 1);
    const figures = {
      c64: await drive(pool, headers, names, C64, 64, server.pid),
      c1: await drive(pool, headers, names, C1, 1, server.pid),
    };
    const sample = await client.machineInstances.admin.get('cart', names[0]);
    if (sample.context.lines.length !== LINES) throw new Error(`unexpected context: ${sample.context.lines.length} lines`);
    await pool.close();
    return { ...figures, contextBytes: Buffer.byteLength(JSON.stringify(sample.context)) };
  } finally {
    await server.stop();
  }
};

const runs = await alternatingRounds(repos, ROUNDS, runOnce);
const median = (xs) => summarize(xs).p50;
const medians = Object.fromEntries(
  Object.entries(runs).map(([repo, list]) => [
    repo,
    Object.fromEntries(
      ['c64', 'c1'].map((loop) => [
        loop,
        Object.fromEntries(
          ['perS', 'p50', 'p99', 'cpuUsPerEvent', 'diskBytesPerEvent', 'syscallBytesPerEvent'].map((figure) => [
            figure,
            median(list.map((run) => run[loop][figure])),
          ]),
        ),
      ]),
    ),
  ]),
);
console.log(JSON.stringify(medians, null, 2));
const file = writeProbeReport('large-context', { kb: KB, lines: LINES, n: N, c64: C64, c1: C1, rounds: ROUNDS, runs, medians });
console.log(`wrote ${file}`);
