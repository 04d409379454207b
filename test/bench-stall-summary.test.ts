import t from 'tap';
import { parsePerfScript } from '../bench/perf-summary.mjs';
import { answersOf, coresDuring, partiesOf, slowClusters, summarizeStalls } from '../bench/stall-summary.mjs';

type Sample = { comm: string; pid: number; tid: number; ms?: number; frames: { sym: string; dso: string }[] };

/** perf script -F comm,pid,tid,time,ip,sym,dso: the node (pid 10), its worker (20), the generator (30), idle. */
const SCRIPT = `node    10/10    1.000000: 
\t    7f31e005fb00 JS:*commit file:///x/dist/store/lmdb/lmdb-instance-store.js:130:17 (/tmp/perf-10.map)

node    20/20    1.002000: 
\t    c3f79 v8::internal::ScavengerCollector::CollectGarbage (/usr/bin/node)
\t    c3f80 v8::internal::Heap::Scavenge (/usr/bin/node)

node    20/20    1.003000: 
\t    7f31e005fb00 JS:*step file:///x/dist/sandbox/version-isolate.js:255:9 (/tmp/perf-20.map)

node    20/20    1.004000: 
\t    7f31e005fb00 JS:*step file:///x/dist/sandbox/version-isolate.js:255:9 (/tmp/perf-20.map)

node    10/14    1.010000: 
\t    c3f79 v8::internal::ConcurrentMarking::RunMajor (/usr/bin/node)

node    10/15    1.010500: 
\t    c3f79 v8::internal::compiler::PipelineImpl::OptimizeGraph (/usr/bin/node)

node    30/30    1.011000: 
\t    7f31e005fb00 [unknown] (/tmp/perf-30.map)

swapper     0/0     1.012000: 
\t    ffffffff8225f42b pv_native_safe_halt ([kernel.kallsyms])
`;

t.test('perf samples carry their time when perf script was asked for it', async (t) => {
  const samples = parsePerfScript(SCRIPT) as Sample[];
  t.same(
    samples.map((s) => s.ms),
    [1000, 1002, 1003, 1004, 1010, 1010.5, 1011, 1012],
  );
  t.equal((parsePerfScript('node 1/1 \n\t 7f f (/x)\n') as Sample[])[0]?.ms, undefined, 'and none without it');
});

t.test('each sample is put with its process, main thread or not, and GC or JIT from its stack', async (t) => {
  const samples = parsePerfScript(SCRIPT) as Sample[];
  const party = partiesOf(samples, 10);
  t.same(samples.map(party), [
    'node main',
    'worker main, GC',
    'worker main',
    'worker main',
    'node threads, GC',
    'node threads, JIT',
    'generator main',
    'idle',
  ]);
  const cores = coresDuring(samples, party, 1000, 1005, 1000);
  t.same(
    cores,
    [
      ['worker main', 0.4],
      ['node main', 0.2],
      ['worker main, GC', 0.2],
    ],
    'samples over rate × duration, most first',
  );
});

t.test('the slowest answers are grouped by the time they were in flight together', async (t) => {
  // 100 answers of 5 ms, one every ms from t0 = 1 s; then three slow ones overlapping, one slow apart.
  const latencyMs = Array.from({ length: 100 }, () => 5);
  const doneMs = Array.from({ length: 100 }, (_, i) => i + 5);
  latencyMs.push(30, 31, 29, 40);
  doneMs.push(130, 131, 132, 400);
  const answers = answersOf({ t0Ns: '1000000000', doneMs, latencyMs });
  t.same(answers[0], { sentMs: 1000, doneMs: 1005, latencyMs: 5 });
  const { threshold, clusters } = slowClusters(answers, { quantile: 0.97 });
  t.equal(threshold, 29);
  t.same(
    clusters,
    [
      { fromMs: 1100, toMs: 1132, answers: 3 },
      { fromMs: 1360, toMs: 1400, answers: 1 },
    ],
    'three in flight together, then one alone; largest cluster first',
  );
  t.same(
    slowClusters(answers, { quantile: 0.97, toMs: 1200 }).clusters,
    [{ fromMs: 1100, toMs: 1132, answers: 3 }],
    'only those inside a window',
  );
});

t.test('the summary names what used the cores during each cluster', async (t) => {
  const samples = parsePerfScript(SCRIPT) as Sample[];
  const latencyMs = [...Array.from({ length: 99 }, () => 1), 9];
  const doneMs = [...Array.from({ length: 99 }, () => 1), 12]; // the slow one: sent at 1003 ms, done at 1012
  const summary = summarizeStalls({ t0Ns: '1000000000', doneMs, latencyMs }, samples, 10, { hz: 1000 });
  t.match(summary, /perf window 12 ms; the slowest 1 % of all answers took ≥ 9\.0 ms; 1 of them in this window, in 1 clusters/);
  t.match(summary, /\| 3 \| 1 \| 9\.0 \| worker main 0\.22 · node threads, GC 0\.11 · node threads, JIT 0\.11 · generator main 0\.11 \|/);
  t.match(summarizeStalls({ t0Ns: '0', doneMs: [], latencyMs: [] }, parsePerfScript('node 1/1 \n\t 7f f (/x)\n'), 1), /no timed samples/);
});
