import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { realtimeMachine } from './fixtures/realtime-machines.js';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';

/**
 * A node that dies is taken for gone as soon as a request to it finds no one listening (NATS says so at
 * once), not only after its missed heartbeats: here the beats would take 10 s (1 s × 10), and its
 * instances must be served again through the others well before that, with nothing lost.
 */

const skip = natsMissing();
const ADMIN = 'departure-admin-key';
// Each test has its nats-server and nodes of its own: the two run side by side (much of their time is
// waiting for nodes to start and for the cluster to settle).
t.jobs = 2;

t.test('a dead node is taken for gone at the first request that finds no one listening', { skip, timeout: 120_000 }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const nodes = await startClusterNodes(t, nats, ['n1', 'n2', 'n3'], {
    adminKey: ADMIN,
    args: ['--heartbeat-ms', '1000', '--missed-heartbeats', '10'],
  });
  const [n1, n2, n3] = nodes as [(typeof nodes)[0], (typeof nodes)[0], (typeof nodes)[0]];
  const members = async (url: string) =>
    ((await call(url, 'GET', '/cluster', { token: ADMIN })).body.members as Array<{ id: string }>).map((m) => m.id).sort();
  await eventually(async () => (await members(n1.url)).length === 3 && (await members(n2.url)).length === 3, { timeoutMs: 30_000 });

  const client = new StateBackedClient(ADMIN, { apiHost: n1.url });
  await client.machines.create('counter');
  await client.machineVersions.create('counter', { clientInfo: 'v1', makeCurrent: true, code: realtimeMachine });
  const orgId = ((await call(n1.url, 'GET', '/orgs', { token: ADMIN })).body.orgs as Array<{ id: string }>)[0]?.id;
  const ownerOf = async (name: string) =>
    (await call(n1.url, 'GET', `/cluster?instance=${orgId}/counter/${name}`, { token: ADMIN })).body.instance?.owner as string | undefined;

  // Instances until one is n3's, each with two events.
  const n3s: string[] = [];
  for (let i = 0; i < 60 && n3s.length < 3; i++) {
    const name = `c${i}`;
    await client.machineInstances.create('counter', { slug: name });
    for (let k = 0; k < 2; k++) await call(n2.url, 'POST', `/machines/counter/i/${name}/events`, { token: ADMIN, body: { event: 'INC' } });
    if ((await ownerOf(name)) === 'n3') n3s.push(name);
  }
  t.ok(n3s.length > 0, `instances owned by n3: ${n3s.join(', ')}`);

  const killedAt = Date.now();
  n3.child.kill('SIGKILL');
  for (const [k, name] of n3s.entries()) {
    const through = k % 2 === 0 ? n1 : n2;
    const answer = await eventually(
      async () => {
        const sent = await call(through.url, 'POST', `/machines/counter/i/${name}/events`, { token: ADMIN, body: { event: 'INC' } });
        return sent.status === 200 ? sent : undefined;
      },
      { timeoutMs: 9_000, intervalMs: 20 },
    );
    t.equal(
      (answer.body.publicContext as { count: number }).count,
      3,
      `${name}: served again through ${through === n1 ? 'n1' : 'n2'} with its two events kept`,
    );
  }
  const tookMs = Date.now() - killedAt;
  t.ok(
    tookMs < 6_000,
    `n3's instances were served again ${tookMs} ms after the kill, before its missed beats (10 s) would have said it was gone`,
  );
  t.same(await members(n1.url), ['n1', 'n2'], 'n1 no longer counts n3');
  t.same(await members(n2.url), ['n1', 'n2'], 'n2 was told, checked, and no longer counts n3');
});

t.test(
  'with --standbys 1 every partition is held by its owner and its next in line, again after a node dies',
  { skip, timeout: 120_000 },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const nodes = await startClusterNodes(t, nats, ['s1', 's2', 's3'], { adminKey: ADMIN, args: ['--standbys', '1'] });
    const held = async (url: string) =>
      ((await call(url, 'GET', '/cluster', { token: ADMIN })).body.partitions.held as Array<{ partition: number; ready: boolean }>).filter(
        (p) => p.ready,
      ).length;
    const total = async (urls: string[]) => (await Promise.all(urls.map(held))).reduce((sum, n) => sum + n, 0);
    const urls = nodes.map((node) => node.url);
    // (64 partitions, each on two nodes: new standbys are taken a few seconds after the members last changed)
    await eventually(async () => (await total(urls)) === 128, { timeoutMs: 30_000, intervalMs: 200 });
    t.pass('64 partitions, each held ready by two of the three nodes');

    const client = new StateBackedClient(ADMIN, { apiHost: urls[0] as string });
    await client.machines.create('counter');
    await client.machineVersions.create('counter', { clientInfo: 'v1', makeCurrent: true, code: realtimeMachine });
    const names = Array.from({ length: 12 }, (_, i) => `s${i}`);
    for (const name of names) {
      await client.machineInstances.create('counter', { slug: name });
      await client.machineInstances.sendEvent('counter', name, { event: 'INC' });
    }
    nodes[2]?.child.kill('SIGKILL');
    const survivors = urls.slice(0, 2);
    for (const [k, name] of names.entries()) {
      const answer = await eventually(
        async () => {
          const sent = await call(survivors[k % 2] as string, 'POST', `/machines/counter/i/${name}/events`, {
            token: ADMIN,
            body: { event: 'INC' },
          });
          return sent.status === 200 ? sent : undefined;
        },
        { timeoutMs: 15_000, intervalMs: 20 },
      );
      t.equal((answer.body.publicContext as { count: number }).count, 2, `${name}: its event kept, the next one applied`);
    }
    await eventually(async () => (await total(survivors)) === 128, { timeoutMs: 30_000, intervalMs: 200 });
    t.pass('after the failover, each of the two survivors holds every partition (one owns it, the other stands by)');
  },
);
