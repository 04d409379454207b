import t from 'tap';
import {
  changedIndexes,
  compareIndexPositions,
  compareIndexValues,
  type IndexOp,
  type IndexPosition,
  type IndexValues,
  MAX_SELECTOR_VISITS,
  matchesIndexOp,
  selectIndexValues,
  selectorProblem,
} from '../src/domain/index-values.js';
import type { IndexQuery, InstanceHead, InstanceStore } from '../src/store/instance-store.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';
import { instanceHead, transitionRecord as record } from './helpers/store-records.js';
import { runScript } from './helpers/wal.js';

const HOLD = 600_000; // LMDB gets nothing from the write-ahead log while a test runs

const head = (name: string, seq: number, indexValues?: IndexValues, extra: Partial<InstanceHead> = {}): InstanceHead =>
  instanceHead(seq, { name, ...(indexValues ? { indexValues } : {}), ...extra });

/** Every page of a query, `limit` at a time, each starting after the last one's last entry. */
const allPages = (store: InstanceStore, query: Omit<IndexQuery, 'after' | 'limit'>, limit: number): IndexPosition[] => {
  const out: IndexPosition[] = [];
  let after: IndexPosition | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = store.queryIndex({ ...query, ...(after ? { after } : {}), limit });
    out.push(...page);
    if (page.length < limit) return out;
    after = page.at(-1);
  }
  throw new Error('paging did not end');
};

/** What a query must answer, from the index values given: a reference computed without LMDB. */
const expected = (values: Map<string, string[]>, op: IndexOp | undefined, operand: string, descending: boolean): IndexPosition[] => {
  const entries = [...values].flatMap(([name, list]) => list.map((value) => ({ value, name })));
  const kept = op ? entries.filter((entry) => matchesIndexOp(entry.value, op, operand)) : entries;
  kept.sort(compareIndexPositions);
  return descending ? kept.reverse() : kept;
};

// Prefixes, the empty string, code points either side of the surrogates (UTF-16 order differs there),
// spaces and punctuation: the order must be the same in LMDB and in compareIndexValues.
const VALUES = [
  '',
  'a',
  'a b',
  'ab',
  'abc',
  'b',
  'B',
  'Z',
  'é',
  '\ue000',
  '\uffff',
  '😀',
  '😀x',
  'x😀',
  'x\ue000',
  '~',
  ' ',
  '!',
  '0',
  '10',
  '9',
];

t.test('compareIndexValues is code point order', async (t) => {
  t.ok(compareIndexValues('😀', '\ue000') > 0, 'an astral code point sorts after U+E000 (UTF-16 would put it before)');
  t.ok(compareIndexValues('a', 'ab') < 0 && compareIndexValues('ab', 'a') > 0 && compareIndexValues('ab', 'ab') === 0);
  const sorted = [...VALUES].sort(compareIndexValues);
  const byBytes = [...VALUES].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  t.same(sorted, byBytes, 'the same as UTF-8 byte order');
});

t.test('selectIndexValues: strings and arrays of strings, bounded, never throwing', async (t) => {
  const context = {
    email: 'a@b.c',
    tags: ['x', 'y', 'x', 7, null, 'z'],
    n: 5,
    flag: true,
    nested: { list: [{ k: 'one' }, { k: 'two' }, { k: 3 }] },
    long: 'é'.repeat(300),
    control: 'a\u001eb',
    many: Array.from({ length: 250 }, (_, i) => `v${i}`),
  };
  const values = selectIndexValues(context, {
    email: '$.email',
    tags: '$.tags',
    n: '$.n',
    flag: '$.flag',
    missing: '$.nope',
    ks: '$.nested.list[*].k',
    long: '$.long',
    control: '$.control',
    many: '$.many',
    filter: '$.nested.list[?(@.k === "one")].k',
    broken: '$[',
    whole: '$',
  });
  t.same(
    values,
    { email: ['a@b.c'], tags: ['x', 'y', 'z'], ks: ['one', 'two'], many: Array.from({ length: 100 }, (_, i) => `v${i}`) },
    'numbers, booleans, objects, missing paths, over-long values, control characters, filters and bad paths index nothing; at most 100 values',
  );
  t.equal(selectIndexValues(context, {}), undefined);
  t.equal(selectIndexValues(context, undefined), undefined);
});

t.test('selectIndexValues: each selector visits at most MAX_SELECTOR_VISITS values of the context, or gives nothing', async (t) => {
  let deep: unknown = 'leaf';
  for (let i = 0; i < 180; i++) deep = { a: deep, email: `e${i}` };
  for (const selector of ['$..*..*..*', '$' + '[*,*]'.repeat(60), '$..a..a..email']) {
    const started = performance.now();
    t.equal(selectIndexValues({ deep }, { costly: selector }), undefined, `${selector.slice(0, 24)}: over the budget, no values`);
    t.ok(performance.now() - started < 500, `and stopped soon (${Math.round(performance.now() - started)} ms)`);
  }
  t.equal(selectIndexValues({ deep }, { once: '$..email' })?.once?.length, 100, 'one descent runs (100 values kept)');
  // A wide object reached many times through unions, then searched: each search costs its width.
  let nested: unknown = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`k${i}`, i]));
  for (let i = 0; i < 14; i++) nested = { a: nested };
  const started2 = performance.now();
  t.equal(
    selectIndexValues(nested as Record<string, never>, { wide: `$${"['a','a']".repeat(14)}..zz` }),
    undefined,
    'a wide node searched again and again runs out of budget',
  );
  t.ok(performance.now() - started2 < 500, `and stops soon (${Math.round(performance.now() - started2)} ms)`);
  const people = (n: number) => ({ people: Array.from({ length: n }, (_, i) => ({ email: `p${i}@x` })) });
  // $..email visits the root, the array and each person (each a visit when walked and when taken), and each email taken
  t.equal(selectIndexValues(people(1_000), { d: '$..email', e: '$.people[*].email' })?.d?.length, 100);
  const over = people(MAX_SELECTOR_VISITS);
  t.same(
    selectIndexValues(
      { ...over, email: 'direct@x' },
      { e: '$.people[*].email', d: '$..email', direct: '$.email', first: '$.people[0].email' },
    ),
    { direct: ['direct@x'], first: ['p0@x'] },
    'over the budget, walking selectors give nothing; direct ones still work',
  );
  for (const selector of ['$.a.b', '$..a', '$.a[1:2]', "$['a','b']", '$.user-email'])
    t.equal(selectorProblem(selector), undefined, selector);
  for (const selector of ['$.a[?(@.b)]', '$.a[(@.length-1)]', '$[', "$['a", '$.a^', '$.*~'])
    t.type(selectorProblem(selector), 'string', selector);
});

t.test('changedIndexes counts the indexes whose values differ (each one write, billed half a transition)', async (t) => {
  t.equal(changedIndexes(undefined, undefined), 0);
  t.equal(changedIndexes(undefined, { a: ['x'], b: ['y'] }), 2, 'a create');
  t.equal(changedIndexes({ a: ['x'], b: ['y', 'z'] }, { a: ['x'], b: ['z', 'y'] }), 0, 'the same values in another order');
  t.equal(changedIndexes({ a: ['x'], b: ['y'] }, { a: ['x'], b: ['y', 'z'] }), 1);
  t.equal(changedIndexes({ a: ['x'], b: ['y'] }, { b: ['w'], c: ['v'] }), 3, 'one gone, one changed, one new');
  t.equal(changedIndexes({ a: ['x'] }, undefined), 1);
});

for (const commitLog of ['wal', 'lmdb'] as const) {
  t.test(`${commitLog}: entries follow the heads; every op, both directions, paged, matches the reference`, async (t) => {
    const dir = tempDataDir();
    t.teardown(() => removeDir(dir));
    // With the log, LMDB gets nothing while the test runs: queries must find the acknowledged heads.
    const store = openLmdbNodeStore(dir, commitLog === 'wal' ? { walApplyDelayMs: HOLD } : { commitLog });
    const { instances } = store;
    const values = new Map<string, string[]>();
    const heads = new Map<string, InstanceHead>();
    for (let i = 0; i < 60; i++) {
      const name = `i${String(i).padStart(2, '0')}`;
      const list =
        i % 7 === 0
          ? []
          : i % 3 === 0
            ? [VALUES[i % VALUES.length] as string, VALUES[(i * 5) % VALUES.length] as string]
            : [VALUES[i % VALUES.length] as string];
      const distinct = [...new Set(list)];
      const created = head(name, 1, distinct.length > 0 ? { tags: distinct, other: ['same'] } : undefined);
      t.equal(await instances.createInstance(created, [record(1)]), true);
      values.set(name, distinct);
      heads.set(name, created);
    }
    // A head-only change keeps the entries; deletions remove them. (Both go to LMDB directly, after the
    // log's commits so far: the commits below stay in the log only.)
    const paused = { ...(heads.get('i01') as InstanceHead), status: 'paused' as const };
    await instances.replaceHead(paused, heads.get('i01') as InstanceHead);
    for (const name of ['i05', 'i10']) {
      t.equal(await instances.deleteInstance('org_a', 'm', name), true);
      values.delete(name);
    }
    // Values change: some swap, some go, some come.
    for (let i = 0; i < 60; i += 4) {
      const name = `i${String(i).padStart(2, '0')}`;
      const previous = heads.get(name) as InstanceHead;
      const list = i % 8 === 0 ? [] : [VALUES[(i + 3) % VALUES.length] as string, 'later'];
      const next = head(name, 2, list.length > 0 ? { tags: list } : undefined);
      await instances.commit(next, previous, [record(2)]);
      values.set(name, list);
      heads.set(name, next);
    }

    const base = { orgId: 'org_a', machine: 'm', index: 'tags' };
    for (const descending of [false, true]) {
      t.same(
        allPages(instances, { ...base, descending }, 1000),
        expected(values, undefined, '', descending),
        `no filter, ${descending ? 'desc' : 'asc'}`,
      );
      for (const op of ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'] as const) {
        for (const operand of ['', 'a', 'ab', '😀', 'later', 'zzz']) {
          const want = expected(values, op, operand, descending);
          t.same(
            allPages(instances, { ...base, filter: { op, value: operand }, descending }, 1000),
            want,
            `${op} ${JSON.stringify(operand)} ${descending ? 'desc' : 'asc'}`,
          );
          t.same(allPages(instances, { ...base, filter: { op, value: operand }, descending }, 3), want, `… in pages of 3`);
        }
      }
    }
    t.same(
      allPages(instances, { ...base, index: 'other', descending: false }, 7).map((p) => p.name),
      [...heads.keys()].filter((name) => heads.get(name)?.indexValues?.other && values.has(name)).sort(),
      'another index of the same heads',
    );
    t.same(instances.queryIndex({ ...base, machine: 'other', descending: false, limit: 10 }), [], 'another machine has none');
    await store.close();

    const reopened = openLmdbNodeStore(dir);
    t.same(
      allPages(reopened.instances, { ...base, descending: false }, 5),
      expected(values, undefined, '', false),
      'LMDB holds the same entries once the log is applied',
    );
    await reopened.close();
  });
}

t.test('after kill -9, the log replay rebuilds the entries of the commits LMDB had not taken', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const crashed = runScript(`
    import { openLmdbNodeStore } from './dist/store/lmdb/lmdb-node-store.js';
    const head = (name, seq, indexValues) => ({ orgId: 'org_a', machine: 'm', name, createdAt: '1970-01-01T00:00:00.000Z', versionId: 'ver_x',
      status: 'running', seq, ts: seq, state: 'idle', context: {}, tags: [], done: false, snapshot: '{}', pendingTimers: [], stoppedChildren: [],
      timerAttempts: {}, ...(indexValues ? { indexValues } : {}) });
    const record = (seq) => ({ seq, createdAt: new Date(seq).toISOString(), ts: seq, event: { type: 'E' }, state: 'idle', context: {} });
    // LMDB takes the creates, then holds back everything after.
    let store = openLmdbNodeStore(${JSON.stringify(dir)});
    for (const name of ['a', 'b', 'c']) await store.instances.createInstance(head(name, 1, { k: [name + '1'] }), [record(1)]);
    await store.close();
    store = openLmdbNodeStore(${JSON.stringify(dir)}, { walApplyDelayMs: ${HOLD} });
    for (let seq = 2; seq <= 5; seq++) await store.instances.commit(head('a', seq, { k: ['a' + seq, 'shared'] }), head('a', seq - 1, seq === 2 ? { k: ['a1'] } : { k: ['a' + (seq - 1), 'shared'] }), [record(seq)]);
    await store.instances.commit(head('b', 2), head('b', 1, { k: ['b1'] }), [record(2)]);
    await store.instances.createInstance(head('d', 1, { k: ['d1', 'shared'] }), [record(1)]);
    process.stdout.write('acknowledged\\n');
    process.kill(process.pid, 'SIGKILL');
  `);
  t.equal(crashed.signal, 'SIGKILL', crashed.stderr);
  t.equal(crashed.stdout.trim(), 'acknowledged');
  const store = openLmdbNodeStore(dir);
  t.same(
    store.instances.queryIndex({ orgId: 'org_a', machine: 'm', index: 'k', descending: false, limit: 100 }),
    [
      { value: 'a5', name: 'a' },
      { value: 'c1', name: 'c' },
      { value: 'd1', name: 'd' },
      { value: 'shared', name: 'a' },
      { value: 'shared', name: 'd' },
    ],
    "each instance has its last acknowledged head's entries and no older one",
  );
  await store.close();
});
