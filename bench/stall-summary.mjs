// What the two cores were doing while the slowest answers waited. At 64 requests in flight a p99 is not
// made of unlucky single requests: the slowest 1 % come in clusters, every request in flight at once,
// during stalls of 10–30 ms in which few or no answers come back. This joins the generator's answer
// times (BENCH_TIMINGS) with a system-wide `perf record` on the same clock, finds those clusters, and
// says for each what used the cores meanwhile: the node's main thread, its other threads (libuv's pool,
// V8's helpers), the sandbox worker's, the generator's, other processes, idle; each split into garbage
// collection, the JIT compiler and the rest, from the sample's stack.
//
// CLI (bench/README.md, "Stalls"):
//   perf record -a -g -k CLOCK_MONOTONIC -F 1999 -o perf.data -- sleep 6      (during the measured phase)
//   perf script -i perf.data -F comm,pid,tid,time,ip,sym,dso > perf.txt
//   node bench/stall-summary.mjs TIMINGS.json perf.txt SERVER_PID [CLUSTERS=8]
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parsePerfScript } from './perf-summary.mjs';

const GC_FRAME = /Scavenge|MarkCompact|Heap::CollectGarbage|ConcurrentMarking|IncrementalMarking|Sweeper|MinorMC|Evacuat/;
const JIT_FRAME = /compiler::|OptimizingCompile|Turbofan|Maglev|Compiler::Compile/;

/** The answers of a BENCH_TIMINGS file, each as { sentMs, doneMs, latencyMs } on CLOCK_MONOTONIC. */
export const answersOf = (timings) => {
  const t0Ms = Number(BigInt(timings.t0Ns)) / 1e6;
  return timings.latencyMs.map((latencyMs, i) => {
    const doneMs = t0Ms + timings.doneMs[i];
    return { sentMs: doneMs - latencyMs, doneMs, latencyMs };
  });
};

/**
 * The answers at or above the `quantile` latency, grouped into clusters of answers that were in flight
 * together (each starts before the previous one's latest end); largest first.
 */
export const slowClusters = (answers, { quantile = 0.99, fromMs = -Infinity, toMs = Infinity } = {}) => {
  if (answers.length === 0) return { threshold: undefined, clusters: [] };
  const sorted = answers.map((a) => a.latencyMs).sort((a, b) => a - b);
  const threshold = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * quantile))];
  const slow = answers
    .filter((a) => a.latencyMs >= threshold && a.sentMs >= fromMs && a.doneMs <= toMs)
    .sort((a, b) => a.sentMs - b.sentMs);
  const clusters = [];
  for (const answer of slow) {
    const last = clusters.at(-1);
    if (last && answer.sentMs <= last.toMs) {
      last.toMs = Math.max(last.toMs, answer.doneMs);
      last.answers++;
    } else clusters.push({ fromMs: answer.sentMs, toMs: answer.doneMs, answers: 1 });
  }
  return { threshold, clusters: clusters.sort((a, b) => b.answers - a.answers || a.fromMs - b.fromMs) };
};

/**
 * Who a sample belongs to. The worker and the generator are not named by pid: the busiest process
 * other than the node is its sandbox worker, the next one the generator (true of a bench run).
 */
export const partiesOf = (samples, serverPid) => {
  const perPid = new Map();
  for (const s of samples) if (s.pid !== 0 && s.pid !== serverPid) perPid.set(s.pid, (perPid.get(s.pid) ?? 0) + 1);
  const [worker, generator] = [...perPid.entries()].sort((a, b) => b[1] - a[1]).map(([pid]) => pid);
  return (s) => {
    if (s.pid === 0) return 'idle';
    const whose = s.pid === serverPid ? 'node' : s.pid === worker ? 'worker' : s.pid === generator ? 'generator' : 'other processes';
    const thread = whose === 'other processes' ? '' : s.tid === s.pid ? ' main' : ' threads';
    const what = s.frames.some((f) => GC_FRAME.test(f.sym)) ? ', GC' : s.frames.some((f) => JIT_FRAME.test(f.sym)) ? ', JIT' : '';
    return `${whose}${thread}${what}`;
  };
};

/** Cores used per party between two times: samples ÷ (rate × duration). */
export const coresDuring = (samples, party, fromMs, toMs, hz) => {
  const counts = new Map();
  for (const s of samples) {
    if (s.ms < fromMs || s.ms >= toMs) continue;
    const who = party(s);
    counts.set(who, (counts.get(who) ?? 0) + 1);
  }
  const seconds = (toMs - fromMs) / 1000;
  return [...counts.entries()].map(([who, n]) => [who, n / (hz * seconds)]).sort((a, b) => b[1] - a[1]);
};

const listCores = (cores) =>
  cores
    .filter(([, c]) => c >= 0.01)
    .map(([who, c]) => `${who} ${c.toFixed(2)}`)
    .join(' · ');

export const summarizeStalls = (timings, samples, serverPid, { hz = 1999, clusters: shown = 8 } = {}) => {
  const timed = samples.filter((s) => s.ms !== undefined);
  if (timed.length === 0) return 'no timed samples: run perf script with -F comm,pid,tid,time,ip,sym,dso';
  const fromMs = timed[0].ms;
  const toMs = timed.at(-1).ms;
  const answers = answersOf(timings);
  const { threshold, clusters } = slowClusters(answers, { fromMs, toMs });
  const party = partiesOf(timed, serverPid);
  const lines = [
    `perf window ${(toMs - fromMs).toFixed(0)} ms; the slowest 1 % of all answers took ≥ ${threshold?.toFixed(1)} ms; ${clusters.reduce((n, c) => n + c.answers, 0)} of them in this window, in ${clusters.length} clusters`,
    '',
    `Cores used over the whole window: ${listCores(coresDuring(timed, party, fromMs, toMs, hz))}`,
    '',
    '| cluster (ms into the window) | slow answers | span (ms) | cores used meanwhile |',
    '|---|---:|---:|---|',
  ];
  for (const c of clusters.slice(0, shown)) {
    lines.push(
      `| ${(c.fromMs - fromMs).toFixed(0)} | ${c.answers} | ${(c.toMs - c.fromMs).toFixed(1)} | ${listCores(coresDuring(timed, party, c.fromMs, c.toMs, hz))} |`,
    );
  }
  return lines.join('\n');
};

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [timingsFile, perfFile, serverPid, shown = '8', hz = '1999'] = process.argv.slice(2);
  if (!timingsFile || !perfFile || !serverPid) {
    process.stderr.write('usage: node bench/stall-summary.mjs TIMINGS.json PERF_SCRIPT_OUTPUT SERVER_PID [CLUSTERS=8] [HZ=1999]\n');
    process.exit(2);
  }
  const timings = JSON.parse(readFileSync(timingsFile, 'utf8'));
  const samples = parsePerfScript(readFileSync(perfFile, 'utf8'));
  process.stdout.write(summarizeStalls(timings, samples, Number(serverPid), { clusters: Number(shown), hz: Number(hz) }) + '\n');
}
