import t from 'tap';
import { NatsUpdateBus } from '../src/cluster/nats-update-bus.js';
import type { InstanceNews } from '../src/domain/instance-news.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

/** The cluster's update bus over a real 3-server NATS cluster: order, echo, listening per instance. */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const update = (seq: number, name = 'i'): InstanceNews => ({
  kind: 'update',
  orgId: 'org_a',
  machine: 'm',
  name,
  versionId: 'ver_1',
  seq,
  ts: 1_000 + seq,
  state: 'on',
  context: { seq },
  tags: [],
  done: false,
});

t.test("an owner's news reach its own listeners at once and other nodes' in commit order, once", { skip }, async (t) => {
  const nats = await startNats(3);
  t.teardown(() => nats.stop());
  const [one, two] = await Promise.all([connectTo(nats, 'one'), connectTo(nats, 'two')]);
  t.teardown(() => Promise.all([one.close(), two.close()]));
  const onError = (message: string, error: unknown) => t.fail(`${message}: ${String(error)}`);
  const owner = new NatsUpdateBus(one, { cluster: 'c', nodeId: 'n1', onError });
  const other = new NatsUpdateBus(two, { cluster: 'c', nodeId: 'n2', onError });
  const local: number[] = [];
  const remote: number[] = [];
  const elsewhere: string[] = [];
  owner.listen('org_a', 'm', 'i', (news) => news.kind === 'update' && local.push(news.seq));
  const stop = other.listen('org_a', 'm', 'i', (news) => news.kind === 'update' && remote.push(news.seq));
  other.listen('org_a', 'm', 'j', (news) => elsewhere.push(news.kind));
  // Interest crosses the cluster's routes in the order it was made: once the probe's (made last) reaches
  // the owner's server, so did the others, and nothing published after is dropped for want of a listener.
  let probed = false;
  other.listen('org_a', 'm', 'probe', () => (probed = true));
  await two.flush();
  for (let i = 0; i < 500 && !probed; i++) {
    owner.publish(update(1, 'probe'));
    await sleep(20);
  }
  t.ok(probed, "the other node's interest reached the owner's server");
  for (let seq = 1; seq <= 500; seq++) owner.publish(update(seq));
  t.same(
    local,
    Array.from({ length: 500 }, (_, i) => i + 1),
    'local listeners are told synchronously',
  );
  for (let i = 0; i < 200 && remote.length < 500; i++) await sleep(10);
  t.same(remote, local, "the other node gets every one, in order, and no echo doubles the owner's");
  t.same(elsewhere, [], 'a listener of another instance hears nothing');
  stop();
  owner.publish(update(501));
  await sleep(100);
  t.equal(remote.length, 500, 'nothing after unlistening');
  owner.publish({ kind: 'deleted', orgId: 'org_a', machine: 'm', name: 'j' });
  for (let i = 0; i < 100 && elsewhere.length === 0; i++) await sleep(10);
  t.same(elsewhere, ['deleted'], 'a deletion crosses too');
});
