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
