import t from 'tap';
import { Membership } from '../src/cluster/membership.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

/** Membership over a real nats-server: joining, leaving, a node that stops beating, a restart. */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const options = (id: string) => ({ cluster: 'test', self: { id, url: `http://127.0.0.1/${id}` }, heartbeatMs: 100, missedHeartbeats: 4 });

t.test('nodes see each other, a leaver at once, a silent one after its missed beats', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const connections = await Promise.all(['a', 'b', 'c'].map((id) => connectTo(nats, id)));
  t.teardown(() => Promise.all(connections.map((nc) => nc.close())));
  const [a, b, c] = ['a', 'b', 'c'].map((id, i) => new Membership(connections[i] as never, options(`node-${id}`))) as [
    Membership,
    Membership,
    Membership,
  ];
  const changes: string[][] = [];
  a.onChange((members) => changes.push([...members]));
  await Promise.all([a.start(), b.start(), c.start()]);
  for (const m of [a, b, c]) t.same(m.current(), ['node-a', 'node-b', 'node-c'], 'every view has all three');
  t.same(a.member('node-b')?.url, 'http://127.0.0.1/node-b');

  await c.stop();
  await sleep(30);
  t.same(a.current(), ['node-a', 'node-b'], 'a node that leaves is dropped at once');

  // b stops beating without a word (its connection closes, as when its process is killed).
  const silencedAt = Date.now();
  await (connections[1] as { close(): Promise<void> }).close();
  while (a.current().includes('node-b') && Date.now() - silencedAt < 3_000) await sleep(20);
  const tookMs = Date.now() - silencedAt;
  t.same(a.current(), ['node-a'], `a silent node is dropped after its missed beats (${tookMs} ms)`);
  t.ok(tookMs >= 300 && tookMs < 1_000, 'between 3 and 10 beats');

  // c comes back under the same id: seen again, with its new start time.
  const again = new Membership(connections[2] as never, options('node-c'));
  await again.start();
  t.same(a.current(), ['node-a', 'node-c']);
  t.same(again.current(), ['node-a', 'node-c'], 'the newcomer learnt the cluster within its start');
  t.ok(changes.length >= 4, 'listeners were told each change');
  await again.stop();
  await a.stop();
});

t.test('different cluster names on one NATS do not mix', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const [one, two] = await Promise.all([connectTo(nats, 'one'), connectTo(nats, 'two')]);
  t.teardown(() => Promise.all([one.close(), two.close()]));
  const x = new Membership(one, { ...options('x'), cluster: 'blue' });
  const y = new Membership(two, { ...options('y'), cluster: 'green' });
  await Promise.all([x.start(), y.start()]);
  t.same(x.current(), ['x']);
  t.same(y.current(), ['y']);
  await Promise.all([x.stop(), y.stop()]);
});
