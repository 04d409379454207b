/**
 * Requests to other nodes (src/cluster/node-requests.ts) on a real nats-server: a request in flight
 * when this node's connection to NATS comes back is lost (asked again by the forwarder), not left to
 * wait out its timeout: the server it was on may have died holding it or its answer.
 */
import t, { type Test } from 'tap';
import type { NatsConnection } from '@nats-io/transport-node';
import { NodeRequests } from '../src/cluster/node-requests.js';
import { eventually } from './helpers/eventually.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

const skip = natsMissing();

/** `promise`'s outcome, or 'still waiting' after `ms` (a timer that does not hold the test's process open). */
const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'still waiting'> =>
  Promise.race([promise, new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), ms).unref())]);

/**
 * A nats-server and a connection for each node named, closed when the test ends; each node but the
 * first takes the requests on `<node>.commands` and never answers them (as a node whose answer the
 * dead server held), counted in `taken()`.
 */
const nodesOnNats = async (t: Test, names: string[]) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const connections = await Promise.all(names.map((name) => connectTo(nats, name)));
  t.teardown(() => Promise.all(connections.map((connection) => connection.close())));
  let taken = 0;
  for (const [i, connection] of connections.entries()) {
    if (i === 0) continue;
    connection.subscribe(`${names[i]}.commands`, {
      callback: () => {
        taken++;
      },
    });
    await connection.flush();
  }
  const connection = (name: string): NatsConnection => connections[names.indexOf(name)] as NatsConnection;
  return { nats, connection, taken: () => taken };
};

t.test('a request in flight when the connection comes back ends as lost at once', { skip }, async (t) => {
  const { nats, connection, taken } = await nodesOnNats(t, ['asker', 'owner']);
  const asker = connection('asker');
  const requests = new NodeRequests(asker, { members: () => ['owner'], checkMs: 50 });

  const answered = await within(requests.request('owner', 'owner.commands', new Uint8Array([1]), 500), 5_000);
  t.same(answered, { lost: true }, 'an unanswered request ends as lost at its timeout');

  const sentAt = Date.now();
  const end = requests.request('owner', 'owner.commands', new Uint8Array([2]), 60_000);
  await eventually(() => taken() === 2, { message: 'the owner did not take the second request' });
  await nats.kill(0);
  await nats.restart(0);
  const outcome = await within(end, 20_000);
  t.same(outcome, { lost: true }, 'lost once the connection came back');
  t.ok(Date.now() - sentAt < 20_000, `after ${Date.now() - sentAt} ms, not the request's 60 s`);
});

t.test('a request in flight to a node whose connection comes back ends as lost once it says so', { skip }, async (t) => {
  const { connection, taken } = await nodesOnNats(t, ['asker', 'owner', 'other']);
  const asker = connection('asker');
  const owner = connection('owner');
  const subject = 'test.reconnected';
  const requests = new NodeRequests(asker, { members: () => ['owner', 'other'], checkMs: 50, reconnects: { nodeId: 'asker', subject } });
  // The owner's own requests say when its connection came back.
  new NodeRequests(owner, { members: () => [], checkMs: 50, reconnects: { nodeId: 'owner', subject } });
  await owner.flush();
  await asker.flush();

  const sentAt = Date.now();
  const toOwner = requests.request('owner', 'owner.commands', new Uint8Array([1]), 60_000);
  const toOther = requests.request('other', 'other.commands', new Uint8Array([2]), 2_000);
  await eventually(() => taken() === 2, { message: 'the requests were not taken' });
  await owner.reconnect();
  t.same(await within(toOwner, 20_000), { lost: true }, "lost once the owner's connection came back");
  t.ok(Date.now() - sentAt < 20_000, `after ${Date.now() - sentAt} ms, not the request's 60 s`);
  t.same(await within(toOther, 20_000), { lost: true }, 'a request to another node waits for its own end');
  t.ok(Date.now() - sentAt >= 1_900, 'which is its timeout');
});
