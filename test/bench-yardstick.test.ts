/** The yardstick bench scenario's pure parts: arms, round order, medians and paired ratios, aims, failure, the counter book (no server). */
import t from 'tap';
import { loadConfig } from '../bench/lib/config.mjs';
import { CounterBook, counterApi } from '../bench/lib/counter-book.mjs';
import {
  aimsFor,
  parseArms,
  roundOrder,
  runYardstick,
  summarizeRounds,
  yardstickFailed,
  yardstickMarkdown,
} from '../bench/lib/yardstick.mjs';

/** A target's loop with these figures. */
const loop = (
  throughput: number,
  p50: number,
  p99: number,
  cpuUs: Record<string, number>,
  statusCounts: Record<string, number> = { 200: 10 },
) => ({
  throughput,
  acked: 10,
  latencyMs: { p50, p90: p50, p99, max: p99 },
  cpuUs,
  generatorUs: 100,
  hostBusyCores: 1.5,
  statusCounts,
});
const yard = (c64: number, p99: number, c1p50: number) => ({
  kind: 'yardstick',
  create: { statusCounts: { 200: 4 } },
  warmup: { statusCounts: { 200: 4 } },
  c64: loop(c64, 20, p99, { node: 400, postgres: 200, total: 600 }),
  c1: loop(1000, c1p50, 3, { node: 300, postgres: 200, total: 500 }),
  verify: { ok: true, mismatches: 0, answerMismatches: 0 },
});
const held = (c64: number, p99: number, c1p50: number, total = 250) => ({
  kind: 'statehold',
  create: { statusCounts: { 200: 4 } },
  warmup: { statusCounts: { 200: 4 } },
  c64: loop(c64, 10, p99, { main: 100, nodeOther: 50, worker: total - 150, total }),
  c1: loop(900, c1p50, 4, { main: 400, nodeOther: 100, worker: 300, total: 800 }),
  verify: { ok: true, mismatches: 0, answerMismatches: 0 },
});
const rounds = [
  { round: 1, order: ['yardstick', 'statehold'], targets: { yardstick: yard(2000, 50, 0.7), statehold: held(5000, 40, 0.5) } },
  { round: 2, order: ['statehold', 'yardstick'], targets: { yardstick: yard(2500, 40, 0.8), statehold: held(4000, 60, 0.6, 350) } },
  { round: 3, order: ['yardstick', 'statehold'], targets: { yardstick: yard(1000, 60, 1), statehold: held(3000, 30, 0.9, 300) } },
];

t.test('arms: label[@repoRoot]=extra server args, ;-separated', async (t) => {
  t.same(parseArms('statehold='), [{ label: 'statehold', args: [] }]);
  t.same(parseArms(' process=--sandbox process ; inline=--sandbox  inline;'), [
    { label: 'process', args: ['--sandbox', 'process'] },
    { label: 'inline', args: ['--sandbox', 'inline'] },
  ]);
  t.same(parseArms('old@/work/wt-old=;new='), [
    { label: 'old', repoRoot: '/work/wt-old', args: [] },
    { label: 'new', args: [] },
  ]);
  t.throws(() => parseArms('statehold'), /label\[@repoRoot\]=args/);
  t.throws(() => parseArms('a b=x'), /bad label/);
  t.throws(() => parseArms('a=;a=--x'), /twice/);
  t.throws(() => parseArms('yardstick='), /the yardstick itself/);
  t.throws(() => parseArms('old@=x'), /empty repoRoot/);
  t.throws(() => parseArms(' ; '), /no arm/);
});

t.test('rounds alternate: the yardstick first in odd rounds, last in even ones', async (t) => {
  t.same(roundOrder(['a', 'b'], 1), ['yardstick', 'a', 'b']);
  t.same(roundOrder(['a', 'b'], 2), ['b', 'a', 'yardstick']);
  t.same(roundOrder(['statehold'], 3), ['yardstick', 'statehold']);
});

t.test('medians over rounds, and the median of each round’s own ratio', async (t) => {
  const s = summarizeRounds(rounds, ['statehold']);
  t.equal(s.targets.yardstick.c64.perSecond, 2000);
  t.equal(s.targets.statehold.c64.perSecond, 4000);
  t.equal(s.targets.statehold.c64.p99, 40);
  t.same(s.targets.statehold.c64.cpuUs, { main: 100, nodeOther: 50, worker: 150, total: 300 });
  t.same(s.targets.yardstick.c1.cpuUs, { node: 300, postgres: 200, total: 500 });
  t.same(
    s.paired.statehold.perRound.map((p: { c64Throughput: number }) => p.c64Throughput),
    [2.5, 1.6, 3],
  );
  t.equal(s.paired.statehold.median.c64Throughput, 2.5, 'not 4000 / 2000: each round’s own ratio');
  t.equal(s.paired.statehold.median.c64P99, 0.8, 'the median of 0.8, 1.5 and 0.5');
  t.equal(s.paired.statehold.median.c1P50, 0.75, 'the median of 0.714, 0.75 and 0.9');
  t.equal(s.paired.statehold.median.c64CpuPerEvent, 0.5, 'the median of 0.417, 0.583 and 0.5');
  const two = summarizeRounds(rounds.slice(0, 2), ['statehold']);
  t.equal(two.targets.statehold.c64.perSecond, 4500, 'an even count: the mean of the middle two');
  const gap = summarizeRounds([{ round: 1, order: ['yardstick', 'statehold'], targets: { statehold: held(1, 1, 1) } }], ['statehold']);
  t.equal(gap.paired.statehold.median.c64Throughput, null, 'no yardstick figure, no ratio');
});

t.test('aims: printed from the paired medians; nothing lost from every round', async (t) => {
  const s = summarizeRounds(rounds, ['statehold']);
  const aims = aimsFor(s, 'statehold', rounds);
  t.same(
    aims.map((a: { met: boolean | null }) => a.met),
    [true, true, true, true, true],
  );
  const lossy = [
    ...rounds.slice(0, 2),
    { ...rounds[2], targets: { ...rounds[2]!.targets, statehold: { ...held(3000, 30, 0.9), verify: { ok: false } } } },
  ];
  t.equal(aimsFor(summarizeRounds(lossy, ['statehold']), 'statehold', lossy)[2]?.met, false);
  const slow = [
    { round: 1, order: ['yardstick', 'statehold'], targets: { yardstick: yard(2000, 50, 0.7), statehold: held(3000, 60, 0.7, 400) } },
  ];
  t.same(
    aimsFor(summarizeRounds(slow, ['statehold']), 'statehold', slow).map((a: { met: boolean | null }) => a.met),
    [false, false, true, false, false],
  );
});

t.test('failed: errors, non-200 answers, wrong counts; skipped is not failed', async (t) => {
  t.equal(yardstickFailed({ skipped: 'no yardstick' }), false);
  t.equal(yardstickFailed({ rounds }), false);
  t.equal(yardstickFailed({ rounds, error: 'boom' }), true);
  t.equal(yardstickFailed({ rounds: [] }), true);
  const with503 = {
    ...rounds[0],
    targets: { ...rounds[0]!.targets, yardstick: { ...yard(1, 1, 1), c1: loop(1, 1, 1, {}, { 200: 9, 503: 1 }) } },
  };
  t.equal(yardstickFailed({ rounds: [with503] }), true);
  const wrong = { ...rounds[0], targets: { ...rounds[0]!.targets, statehold: { ...held(1, 1, 1), verify: { ok: false } } } };
  t.equal(yardstickFailed({ rounds: [wrong] }), true);
  const errored = { ...rounds[0], targets: { ...rounds[0]!.targets, statehold: { kind: 'statehold', error: 'no server' } } };
  t.equal(yardstickFailed({ rounds: [errored] }), true);
  const noWarmup = { ...rounds[0], targets: { yardstick: { ...yard(1, 1, 1), warmup: undefined }, statehold: held(1, 1, 1) } };
  t.equal(yardstickFailed({ rounds: [noWarmup] }), false, 'a run without a warm-up');
});

/** An undici-like pool whose every request is answered by `answer`, on the next tick. */
const fakePool = (answer: (opts: { method: string; path: string; body?: string }) => { status: number; body: unknown }) => ({
  dispatch(
    opts: { method: string; path: string; body?: string },
    handler: { onResponseStart: (c: null, s: number) => void; onResponseData: (c: null, b: Buffer) => void; onResponseEnd: () => void },
  ) {
    setImmediate(() => {
      const a = answer(opts);
      handler.onResponseStart(null, a.status);
      handler.onResponseData(null, Buffer.from(JSON.stringify(a.body)));
      handler.onResponseEnd();
    });
    return true;
  },
});

t.test('the counter book: the same code for both targets, each answer’s count checked, doubt after a 5xx', async (t) => {
  const statehold = counterApi({ kind: 'statehold', machine: 'counter', token: 'tok' });
  t.same(statehold.send('k1', 3), ['POST', '/machines/counter/i/k1/events', { event: { type: 'INC', by: 3 } }]);
  t.match(statehold.headers, { authorization: 'Bearer tok' });
  t.equal(statehold.countOf({ state: 'active', publicContext: { count: 4 } }), 4);
  const yardstick = counterApi({ kind: 'yardstick' });
  t.same(yardstick.send('k1', 3), ['POST', '/counter/k1/send', { type: 'INC', by: 3 }]);
  t.same(yardstick.create('k1'), ['POST', '/counter/k1/create', {}]);
  t.equal(yardstick.countOf({ state: 'active', count: 4 }), 4);

  const counts = new Map<string, number>();
  let fail = false;
  let lie = false;
  const pool = fakePool(({ method, path, body }) => {
    const key = path.split('/')[2]!;
    if (method === 'GET') return { status: 200, body: { state: 'active', count: counts.get(key) ?? 0 } };
    if (fail) return { status: 503, body: { code: 'unavailable' } };
    const next = (counts.get(key) ?? 0) + JSON.parse(body!).by;
    counts.set(key, next);
    return { status: 200, body: { state: 'active', count: lie ? next + 1 : next } };
  });
  const book = new CounterBook({ api: yardstick, count: 2, by: () => 2 });
  const tally: Record<string, number> = {};
  t.match(await book.sendNext(pool, 0, tally), { ok: true });
  t.match(await book.sendNext(pool, 0, tally), { ok: true });
  t.equal(book.acked[0], 4);
  t.equal(book.answerMismatches, 0);
  lie = true;
  await book.sendNext(pool, 1, tally);
  t.equal(book.answerMismatches, 1, 'an answer with the wrong count');
  lie = false;
  fail = true;
  await book.sendNext(pool, 0, tally);
  t.same(tally, { 200: 3, '503 unavailable': 1 });
  t.equal(book.doubt[0], 2);
  t.same(await book.read(pool, 0), { count: 4 });
  t.ok(book.matches(0, 4), 'the 503 did not count');
  t.ok(book.matches(0, 6), 'or it did');
  t.notOk(book.matches(0, 3), 'less than acknowledged: lost');
  t.notOk(book.matches(1, 3), 'more than acknowledged, and nothing in doubt');
});

t.test('knobs, and a missing yardstick is a skip, not an error', async (t) => {
  const sizes = {
    BENCH_SCENARIOS: 'yardstick',
    BENCH_YARDSTICK_DIR: '/nonexistent/yardstick',
    BENCH_YARDSTICK_STATEHOLD: 'process=--sandbox process;old@/tmp/x=',
    BENCH_YARDSTICK_INSTANCES: '100',
    BENCH_YARDSTICK_EVENTS: '500',
    BENCH_YARDSTICK_ROUNDS: '3',
    BENCH_YARDSTICK_XSTATE: '4',
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
  t.match(scenario, {
    kind: 'yardstick',
    dir: '/nonexistent/yardstick',
    instances: 100,
    events: 500,
    c1Events: 3000,
    warmupEvents: 300,
    rounds: 3,
    xstate: 4,
    arms: [
      { label: 'process', args: ['--sandbox', 'process'] },
      { label: 'old', repoRoot: '/tmp/x' },
    ],
  });
  const r = await runYardstick(scenario, config, {
    startServer: () => {
      throw new Error('no server for a skip');
    },
    repoRoot: process.cwd(),
    log: () => undefined,
  });
  t.match('skipped' in r && r.skipped, /no yardstick at \/nonexistent\/yardstick/);
  t.equal(yardstickFailed(r), false);
  t.match(yardstickMarkdown(r, String).join('\n'), /yardstick: skipped/);
  const full = {
    scenario: { ...scenario, arms: [{ label: 'statehold', args: [] }] },
    rounds,
    summary: summarizeRounds(rounds, ['statehold']),
  };
  const md = yardstickMarkdown({ ...full, aims: { statehold: aimsFor(full.summary, 'statehold', rounds) } }, (x: number) => String(x)).join(
    '\n',
  );
  t.match(md, /\| statehold \| C=64 \| 4,000 \|/);
  t.match(md, /\| yardstick \| C=64 \| 2,000 \| .* \| 600 \(node 400 \+ PostgreSQL 200\) \|/);
  t.match(md, /\| median \| \| statehold \| 2.5 \|/);
});
