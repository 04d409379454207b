import { createHmac } from 'node:crypto';
import t from 'tap';
import { INDEXED_SELECTORS, indexedMachine } from './fixtures/indexed-machines.js';
import { call } from './helpers/http.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';

/**
 * Indexes on a 3-node cluster: each partition's owner writes the index entries of its instances in its
 * LMDB, and a query through any node is gathered from the owners and merged, so it finds instances
 * written through any other node at once, in the same order, also after a failover.
 */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'cluster-indexes-admin';

type Entry = { indexValue: string; slug: string };
const byIndexOrder = (a: Entry, b: Entry) =>
  Buffer.compare(Buffer.from(a.indexValue), Buffer.from(b.indexValue)) || (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0);

t.test('instances written through one node are found by a query on another, in the same order', { skip, timeout: 240_000 }, async (t) => {
  const nats = await startNats(3);
  t.teardown(() => nats.stop());
  const nodes = await startClusterNodes(t, nats, ['n1', 'n2', 'n3'], { adminKey: ADMIN });
  const on = (n: number) => (method: string, path: string, body?: unknown) =>
    call((nodes[n] as { url: string }).url, method, path, { token: ADMIN, ...(body === undefined ? {} : { body }) });

  await indexedMachine(on(0), 'people', ['email', 'tags'], INDEXED_SELECTORS);
  const contexts = new Map<string, { email: string; tags: string[] }>();
  const reference = (index: 'email' | 'tags', op?: (value: string) => boolean, descending = false): Entry[] => {
    const out: Entry[] = [];
    for (const [slug, context] of contexts) {
      const values = index === 'email' ? [context.email] : [...new Set(context.tags)];
      for (const value of values) if (!op || op(value)) out.push({ indexValue: value, slug });
    }
    out.sort(byIndexOrder);
    return descending ? out.reverse() : out;
  };
  const queryAll = async (n: number, index: string, params: Record<string, string>): Promise<Entry[]> => {
    const entries: Entry[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 1000; pages++) {
      const res = await on(n)(
        'GET',
        `/machines/people/indexes/${index}/query?${new URLSearchParams({ ...params, limit: '50', ...(cursor ? { cursor } : {}) })}`,
      );
      if (res.status !== 200) throw new Error(`node ${n + 1}: ${res.status} ${res.text}`);
      entries.push(...res.body.instances);
      cursor = res.body.cursor;
      if (!cursor) break;
    }
    return entries;
  };
  /** What node n answers, at once: each partition's owner answers its part, so a read sees every write acknowledged before it. */
  const seenOn = (n: number, index: 'email' | 'tags', params: Record<string, string>, _want: Entry[]): Promise<Entry[]> =>
    queryAll(n, index, params);

  const COLORS = ['red', 'green', 'blue', 'é', '😀'];
  const names = Array.from({ length: 240 }, (_, i) => `c${String(i).padStart(3, '0')}`);
  let next = 0;
  await Promise.all(
    Array.from({ length: 12 }, async () => {
      while (next < names.length) {
        const i = next++;
        const context = {
          email: `u${i % 37}@${COLORS[i % COLORS.length]}.io`,
          tags: [COLORS[i % 5] as string, COLORS[(i * 2) % 5] as string],
        };
        const res = await on(0)('POST', '/machines/people', { slug: names[i], context });
        if (res.status !== 200) throw new Error(`create: ${res.status} ${res.text}`);
        contexts.set(names[i] as string, context);
      }
    }),
  );

  for (const n of [1, 2, 0]) {
    t.same(await seenOn(n, 'email', {}, reference('email')), reference('email'), `node ${n + 1} lists the email index in order`);
    t.same(
      await seenOn(n, 'tags', { dir: 'desc' }, reference('tags', undefined, true)),
      reference('tags', undefined, true),
      `node ${n + 1}: tags, descending`,
    );
    const gteGreen = reference('tags', (v) => Buffer.compare(Buffer.from(v), Buffer.from('green')) >= 0);
    t.same(await seenOn(n, 'tags', { op: 'gte', value: 'green' }, gteGreen), gteGreen, `node ${n + 1}: tags gte green`);
  }

  // Changes and deletions through node 3, seen on nodes 1 and 2.
  for (const i of [0, 5, 10, 15, 20]) {
    const slug = names[i] as string;
    const res = await on(2)('POST', `/machines/people/i/${slug}/events`, {
      event: { type: 'SET', email: `moved${i}@zz.io`, tags: ['moved'] },
    });
    t.equal(res.status, 200);
    contexts.set(slug, { email: `moved${i}@zz.io`, tags: ['moved'] });
  }
  for (const i of [1, 2, 3]) {
    const slug = names[i] as string;
    const hmac = createHmac('sha256', 'people').update(slug).digest('base64url');
    t.equal(
      (
        await on(2)('DELETE', `/machines/people/i/${slug}`, {
          dangerDataWillBeDeletedForever: true,
          hmacSha256OfMachineInstanceNameWithMachineNameKey: hmac,
        })
      ).status,
      204,
    );
    contexts.delete(slug);
  }
  for (const n of [0, 1]) {
    t.same(
      await seenOn(
        n,
        'tags',
        { op: 'eq', value: 'moved' },
        reference('tags', (v) => v === 'moved'),
      ),
      reference('tags', (v) => v === 'moved'),
      `node ${n + 1} finds the changed values`,
    );
    t.same(
      await seenOn(n, 'email', {}, reference('email')),
      reference('email'),
      `node ${n + 1}: the whole email index after changes and deletions`,
    );
  }

  // A failover: node 3 is killed; its partitions are caught up by the others, and both answer the whole
  // index (a query during the take-over may wait, or answer 503 to be retried; never a partial page).
  await nodes[2]?.stop('SIGKILL');
  for (const n of [0, 1]) {
    let got: Entry[] = [];
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        got = await queryAll(n, 'email', {});
        break;
      } catch (error) {
        if (!/: 503 /.test(String(error))) throw error;
        await sleep(200);
      }
    }
    t.same(got, reference('email'), `node ${n + 1}: the whole email index after node 3 died`);
  }
  const listed = (await on(0)('GET', '/machines/people/i')).body.instances.map((i: { slug: string }) => i.slug);
  t.same(listed, [...contexts.keys()].sort().slice(0, listed.length), 'the instance list after the failover, in order');
});
