import { createHmac } from 'node:crypto';
import { signToken } from '@statebacked/token';
import t, { type Test } from 'tap';
import { INDEXED_SELECTORS, indexedMachine } from './fixtures/indexed-machines.js';
import { call } from './helpers/http.js';
import { type NodeProcess, removeDir, startNode, tempDataDir } from './helpers/node-process.js';

/**
 * Secondary indexes through a real `statehold serve` over HTTP (the 0.1.37 client has no
 * machineInstances.query): every op in both directions against a reference computed here, paging,
 * changes on events and deletions, errors, usage, and entries across a restart and a kill -9.
 */
const dataDir = tempDataDir();
t.teardown(() => removeDir(dataDir));
const admin = 'indexes-admin';
let node: NodeProcess = await startNode({ dataDir, args: ['--admin-key', admin], generatedAdminKey: true });
t.teardown(() => node.stop());

const api = (method: string, path: string, body?: unknown) =>
  call(node.url, method, path, { token: admin, ...(body === undefined ? {} : { body }) });

type Entry = { indexValue: string; slug: string };
/** The reference order, independent of the service's: UTF-8 bytes of the value, then the slug. */
const byIndexOrder = (a: Entry, b: Entry) =>
  Buffer.compare(Buffer.from(a.indexValue), Buffer.from(b.indexValue)) || (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0);
const passes = (value: string, op: string, operand: string) => {
  const c = Buffer.compare(Buffer.from(value), Buffer.from(operand));
  return { eq: c === 0, ne: c !== 0, gt: c > 0, gte: c >= 0, lt: c < 0, lte: c <= 0 }[op] as boolean;
};

/** What each instance's context holds of the indexed fields, as the test set it. */
const contexts = new Map<string, { email: unknown; tags: unknown }>();
/** The reference entries of an index: strings index, arrays index each distinct string, the rest nothing. */
const reference = (index: 'email' | 'tags', op?: string, operand?: string, descending = false): Entry[] => {
  const out: Entry[] = [];
  for (const [slug, context] of contexts) {
    const selected = context[index];
    const values =
      typeof selected === 'string'
        ? [selected]
        : Array.isArray(selected)
          ? [...new Set(selected.filter((v): v is string => typeof v === 'string'))]
          : [];
    for (const value of values) if (op === undefined || passes(value, op, operand as string)) out.push({ indexValue: value, slug });
  }
  out.sort(byIndexOrder);
  return descending ? out.reverse() : out;
};

/** Every page of a query, following cursors; fails on a repeated entry. */
const queryAll = async (
  machine: string,
  index: string,
  params: Record<string, string>,
  limit?: number,
): Promise<{ entries: Entry[]; pages: number }> => {
  const entries: Entry[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const query = new URLSearchParams({ ...params, ...(limit ? { limit: String(limit) } : {}), ...(cursor ? { cursor } : {}) });
    const res = await api('GET', `/machines/${machine}/indexes/${index}/query?${query}`);
    if (res.status !== 200) throw new Error(`query ${query}: ${res.status} ${res.text}`);
    entries.push(...res.body.instances);
    cursor = res.body.cursor;
    pages++;
  } while (cursor && pages < 10_000);
  return { entries, pages };
};

/** Runs `work` on every item, `width` at a time. */
const inParallel = async <T>(items: T[], width: number, work: (item: T) => Promise<void>) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
};

const INSTANCES = 2500;
const DOMAINS = ['a.com', 'b.org', 'é.fr', 'z.io', '日本.jp'];
const TAGS = ['red', 'green', 'blue', 'blue-green', 'Red', '😀', '\ue000', ''];
const emailOf = (i: number): unknown =>
  i % 50 === 7 ? i : i % 50 === 9 ? { nested: 'x' } : `user${i % 613}@${DOMAINS[i % DOMAINS.length]}`;
const tagsOf = (i: number): unknown =>
  i % 11 === 0
    ? 'solo'
    : i % 13 === 0
      ? undefined
      : Array.from({ length: i % 4 }, (_, k) => TAGS[(i * 3 + k * 5) % TAGS.length] as unknown).concat(i % 17 === 0 ? [42, null] : []);
const slugOf = (i: number) => `inst-${String(i).padStart(5, '0')}`;

await indexedMachine(api, 'people', ['email', 'tags', 'unselected'], INDEXED_SELECTORS);
const started = Date.now();
await inParallel(
  Array.from({ length: INSTANCES }, (_, i) => i),
  32,
  async (i) => {
    const context = { email: emailOf(i), tags: tagsOf(i) };
    const res = await api('POST', '/machines/people', { slug: slugOf(i), context });
    if (res.status !== 200) throw new Error(`create ${i}: ${res.status} ${res.text}`);
    contexts.set(slugOf(i), { email: context.email, tags: context.tags });
  },
);
t.comment(`${INSTANCES} instances created in ${Date.now() - started} ms`);

const OPERANDS = { email: ['user1@a.com', 'user5', 'user612@z.io', 'é', ''], tags: ['blue', 'blue-green', 'Red', '😀', ''] } as const;

/** Every op, both directions, a few operands each, against the reference, read in pages of 1000. */
const checkEveryOp = async (t: Test, label: string) => {
  for (const index of ['email', 'tags'] as const) {
    for (const dir of ['asc', 'desc'] as const) {
      t.same(
        (await queryAll('people', index, { dir }, 1000)).entries,
        reference(index, undefined, undefined, dir === 'desc'),
        `${label}: ${index} all ${dir}`,
      );
      for (const op of ['eq', 'ne', 'gt', 'gte', 'lt', 'lte']) {
        for (const operand of OPERANDS[index]) {
          const want = reference(index, op, operand, dir === 'desc');
          const { entries } = await queryAll('people', index, { op, value: operand, dir }, 1000);
          if (JSON.stringify(entries) !== JSON.stringify(want))
            t.same(entries, want, `${label}: ${index} ${op} ${JSON.stringify(operand)} ${dir}`);
          else t.pass(`${label}: ${index} ${op} ${JSON.stringify(operand)} ${dir} (${want.length})`);
        }
      }
    }
  }
};

t.test('every op in both directions matches the reference', async (t) => {
  t.ok(reference('email').length > 2000 && reference('tags').length > 2000, 'thousands of entries in each index');
  t.ok(reference('tags', 'eq', '').length > 0, 'the empty string is a value like any other');
  await checkEveryOp(t, 'created');
  const unselected = await api('GET', '/machines/people/indexes/unselected/query');
  t.same(unselected.body, { instances: [] }, 'an index the version has no selector for holds nothing');
});

t.test('paging with small limits neither skips nor repeats; the default limit is the page size', async (t) => {
  const all = reference('tags');
  const paged = await queryAll('people', 'tags', {}, 37);
  t.same(paged.entries, all, 'pages of 37 give the whole index in order');
  t.equal(paged.pages, Math.ceil(all.length / 37), 'and no empty page after them');
  const desc = await queryAll('people', 'email', { op: 'gte', value: 'user3', dir: 'desc' }, 7);
  t.same(desc.entries, reference('email', 'gte', 'user3', true), 'pages of 7 of a range, descending');
  const eq = await queryAll('people', 'tags', { op: 'eq', value: 'blue' }, 1);
  t.same(eq.entries, reference('tags', 'eq', 'blue'), 'pages of 1 of one value (the slug orders within it)');
  const first = await api('GET', '/machines/people/indexes/email/query');
  t.equal(first.body.instances.length, 100, 'the default limit is the page size');
  t.type(first.body.cursor, 'string');
  t.same(first.body.instances, reference('email').slice(0, 100));
  const last = await api('GET', `/machines/people/indexes/email/query?op=eq&value=${encodeURIComponent('user1@b.org')}`);
  t.notOk('cursor' in last.body, 'no cursor after the last page');
});

t.test('values follow events; deleted instances disappear', async (t) => {
  const changed = Array.from({ length: 300 }, (_, k) => k * 7);
  await inParallel(changed, 16, async (i) => {
    const slug = slugOf(i);
    const current = contexts.get(slug) as { email: unknown; tags: unknown };
    const event =
      i % 3 === 0
        ? { type: 'SET', email: `changed${i}@new.net` }
        : i % 3 === 1
          ? { type: 'SET', tags: ['moved', `t${i % 5}`] }
          : { type: 'SET', email: null, tags: [] };
    const res = await api('POST', `/machines/people/i/${slug}/events`, { event });
    if (res.status !== 200) throw new Error(`event ${slug}: ${res.status} ${res.text}`);
    contexts.set(slug, { email: 'email' in event ? event.email : current.email, tags: 'tags' in event ? event.tags : current.tags });
  });
  const deleted = Array.from({ length: 60 }, (_, k) => 3 + k * 41);
  await inParallel(deleted, 8, async (i) => {
    const slug = slugOf(i);
    const hmac = createHmac('sha256', 'people').update(slug).digest('base64url');
    const res = await api('DELETE', `/machines/people/i/${slug}`, {
      dangerDataWillBeDeletedForever: true,
      hmacSha256OfMachineInstanceNameWithMachineNameKey: hmac,
    });
    if (res.status !== 204) throw new Error(`delete ${slug}: ${res.status} ${res.text}`);
    contexts.delete(slug);
  });
  const moved = (await queryAll('people', 'tags', { op: 'eq', value: 'moved' })).entries;
  t.equal(moved.length, changed.filter((i) => i % 3 === 1 && !deleted.includes(i)).length, 'new values are found');
  const names = new Set(
    [...(await queryAll('people', 'email', {}, 1000)).entries, ...(await queryAll('people', 'tags', {}, 1000)).entries].map((e) => e.slug),
  );
  t.notOk(
    deleted.some((i) => names.has(slugOf(i))),
    'no deleted instance is left in either index',
  );
  await checkEveryOp(t, 'after events and deletions');
});

t.test('errors: unknown machine or index 404; bad parameters 400 naming them; missing scope 403', async (t) => {
  const q = (path: string, token = admin) => call(node.url, 'GET', path, { token });
  t.equal((await q('/machines/nope/indexes/email/query')).status, 404);
  t.match(await q('/machines/people/indexes/nope/query'), { status: 404, body: { code: 'not-found', error: /no index nope/ } });
  t.equal((await q('/machines/people/indexes/bad%20name/query')).status, 404, 'a name no index can have');
  const cases: Array<[string, string]> = [
    ['op=eq', 'value'],
    ['value=x', 'op'],
    ['op=like&value=x', 'op'],
    ['op=&value=x', 'op'],
    ['dir=up', 'dir'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=ten', 'limit'],
    ['limit=-5', 'limit'],
    ['limit=2.5', 'limit'],
    ['cursor=bogus!', 'cursor'],
    [`cursor=${Buffer.from(JSON.stringify({ a: 'inst-00001' })).toString('base64url')}`, 'cursor'],
    [`cursor=${Buffer.from(JSON.stringify({ a: ['x', 'not a slug'] })).toString('base64url')}`, 'cursor'],
    [`op=gt&value=${'x'.repeat(513)}`, 'value'],
  ];
  for (const [query, parameter] of cases) {
    t.match(
      await q(`/machines/people/indexes/email/query?${query}`),
      { status: 400, body: { code: 'invalid-parameter', parameter } },
      query,
    );
  }
  t.equal((await q('/machines/people/indexes/email/query?limit=1000')).status, 200, 'limit 1000 is the largest');
  const key = await call(node.url, 'POST', '/keys', { token: admin, body: { name: 'reader', scopes: ['state.read', 'instances.read'] } });
  const reader = await signToken(
    { stateBackedKeyId: key.body.id, stateBackedSecretKey: key.body.key },
    { sub: 'r' },
    { expires: { in: '1h' } },
  );
  t.match(await q('/machines/people/indexes/email/query', reader), { status: 403, body: { code: 'missing-scope' } });
  const production = await call(node.url, 'POST', '/keys', { token: admin, body: { name: 'prod', use: 'production' } });
  const prod = await signToken(
    { stateBackedKeyId: production.body.id, stateBackedSecretKey: production.body.key },
    { sub: 'p' },
    { expires: { in: '1h' } },
  );
  t.equal((await q('/machines/people/indexes/email/query?limit=1', prod)).status, 200, 'the production preset has indexes.read');
});

t.test('usage: a query is one read; each index write half a transition', async (t) => {
  await indexedMachine(api, 'billed', ['email', 'tags'], INDEXED_SELECTORS);
  const usageOf = async () => {
    const res = await api('GET', '/usage?months=1');
    return (
      (res.body.usage[0].machines as Array<{ machine: string; transitions: number; reads: number }>).find(
        (m) => m.machine === 'billed',
      ) ?? { transitions: 0, reads: 0 }
    );
  };
  await api('POST', '/machines/billed', { slug: 'b1', context: { email: 'x@y.z', tags: ['a'] } });
  t.same(await usageOf(), { machine: 'billed', transitions: 2, reads: 0 }, 'a create writing two indexes: 1 + 2 × 0.5');
  await api('POST', '/machines/billed/i/b1/events', { event: { type: 'SET', email: 'other@y.z' } });
  await api('POST', '/machines/billed/i/b1/events', { event: { type: 'SET', email: 'other@y.z' } });
  t.same(await usageOf(), { machine: 'billed', transitions: 4.5, reads: 0 }, 'an event changing one index: 1.5; one changing none: 1');
  for (let i = 0; i < 3; i++) await api('GET', '/machines/billed/indexes/email/query');
  t.same(await usageOf(), { machine: 'billed', transitions: 4.5, reads: 3 }, 'three queries, three reads');
});

t.test('entries survive a restart and a kill -9', async (t) => {
  const before = {
    email: (await queryAll('people', 'email', {}, 1000)).entries,
    tags: (await queryAll('people', 'tags', {}, 1000)).entries,
  };
  await node.stop();
  node = await startNode({ dataDir, args: ['--admin-key', admin], generatedAdminKey: true });
  t.same((await queryAll('people', 'email', {}, 1000)).entries, before.email, 'after a clean restart: email');
  t.same((await queryAll('people', 'tags', {}, 1000)).entries, before.tags, 'and tags');

  // Acknowledged changes right before the kill are in the write-ahead log, not yet in LMDB.
  const last = Array.from({ length: 40 }, (_, k) => 1 + k * 53).filter((i) => contexts.has(slugOf(i)));
  await inParallel(last, 8, async (i) => {
    const slug = slugOf(i);
    const res = await api('POST', `/machines/people/i/${slug}/events`, {
      event: { type: 'SET', email: `last${i}@kill.io`, tags: ['killed'] },
    });
    if (res.status !== 200) throw new Error(`event ${slug}: ${res.status} ${res.text}`);
    contexts.set(slug, { email: `last${i}@kill.io`, tags: ['killed'] });
  });
  await node.stop('SIGKILL');
  node = await startNode({ dataDir, args: ['--admin-key', admin], generatedAdminKey: true });
  t.same(
    (await queryAll('people', 'tags', { op: 'eq', value: 'killed' })).entries,
    reference('tags', 'eq', 'killed'),
    'the last acknowledged values are indexed',
  );
  await checkEveryOp(t, 'after kill -9');
});

t.test('indexes named like members of every object (toString, constructor, …) hold only their own values', async (t) => {
  const names = ['toString', 'constructor', 'valueOf', 'hasOwnProperty'];
  const byEmail = new Set(['toString', 'constructor']);
  await indexedMachine(api, 'builtins', names, {
    toString: '$.email',
    constructor: '$.email',
    valueOf: '$.tags',
    hasOwnProperty: '$.tags',
  });
  const query = async (index: string) => (await queryAll('builtins', index, {})).entries;
  const expect = async (label: string, email: string | null, tags: string[]) => {
    for (const index of names) {
      const values = byEmail.has(index) ? (email === null ? [] : [email]) : tags;
      t.same(await query(index), values.map((indexValue) => ({ indexValue, slug: 'one' })).sort(byIndexOrder), `${label}: ${index}`);
    }
  };
  const send = async (event: Record<string, unknown>) => {
    const res = await api('POST', '/machines/builtins/i/one/events', { event: { type: 'SET', ...event } });
    t.equal(res.status, 200, `SET ${JSON.stringify(event)}: ${res.text.slice(0, 200)}`);
  };
  t.equal((await api('POST', '/machines/builtins', { slug: 'one', context: { email: 'x', tags: ['p', 'q'] } })).status, 200);
  await expect('created', 'x', ['p', 'q']);
  // Some indexes lose their values while others keep theirs, then get them back, straight after:
  // read from the log's pending heads, and written to LMDB's index entries.
  await send({ email: 5 });
  await expect('email lost', null, ['p', 'q']);
  await send({ email: 'x2', tags: [] });
  await expect('email back, tags lost', 'x2', []);
  await send({ tags: ['r'] });
  await expect('tags back', 'x2', ['r']);
  await node.stop('SIGKILL');
  node = await startNode({ dataDir, args: ['--admin-key', admin], generatedAdminKey: true });
  await expect('after kill -9', 'x2', ['r']);
  await send({ email: 'x3' });
  await expect('writes still taken', 'x3', ['r']);
});
