/** The indexes bench scenario: its pure parts, and one small run against a real server (sizes from the environment's knobs). */
import t from 'tap';
import { loadConfig } from '../bench/lib/config.mjs';
import { compareRounds, indexesFailed, indexesMarkdown, inIndexOrder, runIndexes } from '../bench/lib/indexes.mjs';
import { startServer } from '../bench/lib/server-process.mjs';
import { repoRoot } from './helpers/paths.js';

const window = (perSecond: number, p99: number, status: Record<string, number> = { 200: 10 }) => ({
  perSecond,
  latencyMs: { p50: 1, p99 },
  cpuUsPerEvent: 500,
  statusCounts: status,
});

t.test('rounds: medians per machine, indexed over plain', async (t) => {
  const c = compareRounds([
    { round: 1, plain: window(1000, 10), indexed: window(900, 12) },
    { round: 2, plain: window(1200, 14), indexed: window(1000, 12) },
    { round: 3, plain: window(1100, 11), indexed: window(1045, 13) },
  ]);
  t.equal(c.plain.perSecond, 1100);
  t.equal(c.indexed.perSecond, 1000);
  t.equal(c.throughputRatio, 0.909);
  t.equal(c.p99Ratio, 1.091);
  t.equal(c.pairedThroughputRatio, 0.9, 'the median of 0.9, 0.833 and 0.95');
  t.equal(c.pairedCpuRatio, 1, 'the same CPU per event in every window');
});

t.test('index order: bytes of the value, then the slug, either way', async (t) => {
  const page = [
    { indexValue: 'a', slug: 'x' },
    { indexValue: 'a', slug: 'y' },
    { indexValue: '\ue000', slug: 'a' },
    { indexValue: '😀', slug: 'a' },
  ];
  t.ok(inIndexOrder(page, false));
  t.notOk(inIndexOrder(page, true));
  t.ok(inIndexOrder([...page].reverse(), true));
  t.notOk(inIndexOrder([page[1], page[0]], false), 'slugs order within a value');
  t.notOk(inIndexOrder([page[0], page[0]], false), 'a repeated entry is out of order');
});

t.test('failed: errors, non-200 answers, wrong entries, misordered pages', async (t) => {
  const ok = { rounds: [{ plain: window(1, 1), indexed: window(1, 1) }], checked: { mismatches: 0 }, queryOrder: { misordered: 0 } };
  t.equal(indexesFailed(ok), false);
  t.equal(indexesFailed({ ...ok, error: 'boom' }), true);
  t.equal(indexesFailed({ ...ok, rounds: [] }), true);
  t.equal(indexesFailed({ ...ok, rounds: [{ plain: window(1, 1), indexed: window(1, 1, { 200: 9, '503 unavailable': 1 }) }] }), true);
  t.equal(indexesFailed({ ...ok, checked: { mismatches: 1 } }), true);
  t.equal(indexesFailed({ ...ok, queryOrder: { misordered: 2 } }), true);
  t.equal(indexesFailed({ rounds: ok.rounds }), true, 'nothing checked is a failure');
});

t.test('a small run against a real server: both machines measured, entries checked, every op timed', { timeout: 170_000 }, async (t) => {
  const sizes = {
    BENCH_SCENARIOS: 'indexes',
    BENCH_IDX_INSTANCES: '64',
    BENCH_IDX_EVENTS: '300',
    BENCH_IDX_ROUNDS: '1',
    BENCH_IDX_WARMUP_EVENTS: '64',
    BENCH_IDX_QUERY_INSTANCES: '200',
    BENCH_IDX_QUERIES: '3',
  };
  const saved = Object.fromEntries(Object.keys(sizes).map((key) => [key, process.env[key]]));
  Object.assign(process.env, sizes);
  let config;
  try {
    config = loadConfig();
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
  const [scenario] = config.scenarios;
  t.match(
    scenario,
    { kind: 'indexes', instances: 64, events: 300, rounds: 1, queryInstances: 200, queries: 3 },
    'the sizes come from the environment',
  );
  const r = await runIndexes(scenario, { ...config, keepData: false }, { startServer, repoRoot, log: () => undefined });
  t.equal(r.error, undefined, r.error ?? 'no error');
  t.equal(indexesFailed(r), false);
  t.same(Object.keys(r.rounds?.[0]?.plain?.statusCounts ?? {}), ['200']);
  t.same(r.checked, { instances: 64, mismatches: 0, examples: [] }, 'every indexed instance is in its index once, with its value');
  t.equal(r.queries?.length, 14, 'all and each op, both directions');
  t.ok(r.queries?.every((q) => q.queries === 3 && q.p50 !== null && q.p50 > 0));
  t.equal(r.queries?.find((q) => q.op === 'eq')?.meanReturned, 1, 'eq on an existing owner finds its one instance');
  t.match(indexesMarkdown(r, (x: number) => String(x)).join('\n'), /indexed ÷ plain/);
});
