/**
 * Requests to other nodes (src/cluster/node-requests.ts) on a real nats-server: a request in flight
 * when this node's connection to NATS comes back is lost (asked again by the forwarder), not left to
 * wait out its timeout: the server it was on may have died holding it or its answer.
 */
import t from 'tap';
import { NodeRequests } from '../src/cluster/node-requests.js';
import { eventually } from './helpers/eventually.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

const skip = natsMissing();

/** `promise`'s outcome, or 'still waiting' after `ms` (a timer that does not hold the test's process open). */
const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'still waiting'> =>
  Promise.race([promise, new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), ms).unref())]);

t.test('a request in flight when the connection comes back ends as lost at once', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const asker = await connectTo(nats, 'asker');
  const owner = await connectTo(nats, 'owner');
  t.teardown(async () => {
    await asker.close();
    await owner.close();
  });
  // The owner takes the request and never answers (as one whose answer the dead server held).
  let taken = 0;
  owner.subscribe('owner.commands', {
    callback: () => {
      taken++;
    },
  });
  await owner.flush();
  const requests = new NodeRequests(asker, { members: () => ['owner'], checkMs: 50 });

  const answered = await within(requests.request('owner', 'owner.commands', new Uint8Array([1]), 500), 5_000);
  t.same(answered, { lost: true }, 'an unanswered request ends as lost at its timeout');

  const sentAt = Date.now();
  const end = requests.request('owner', 'owner.commands', new Uint8Array([2]), 60_000);
  await eventually(() => taken === 2, { message: 'the owner did not take the second request' });
  await nats.kill(0);
  await nats.restart(0);
  const outcome = await within(end, 20_000);
  t.same(outcome, { lost: true }, 'lost once the connection came back');
  t.ok(Date.now() - sentAt < 20_000, `after ${Date.now() - sentAt} ms, not the request's 60 s`);
});

t.test('a request in flight to a node whose connection comes back ends as lost once it says so', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const asker = await connectTo(nats, 'asker');
  const owner = await connectTo(nats, 'owner');
  t.teardown(async () => {
    await asker.close();
    await owner.close();
  });
  const other = await connectTo(nats, 'other');
  t.teardown(() => other.close());
  // Both take requests and never answer.
  let taken = 0;
  for (const [connection, subject] of [
    [owner, 'owner.commands'],
    [other, 'other.commands'],
  ] as const)
    connection.subscribe(subject, {
      callback: () => {
        taken++;
      },
    });
  await other.flush();
  const subject = 'test.reconnected';
  const requests = new NodeRequests(asker, { members: () => ['owner', 'other'], checkMs: 50, reconnects: { nodeId: 'asker', subject } });
  // The owner's own requests say when its connection came back.
  new NodeRequests(owner, { members: () => [], checkMs: 50, reconnects: { nodeId: 'owner', subject } });
  await owner.flush();
  await asker.flush();

  const sentAt = Date.now();
  const toOwner = requests.request('owner', 'owner.commands', new Uint8Array([1]), 60_000);
  const toOther = requests.request('other', 'other.commands', new Uint8Array([2]), 2_000);
  await eventually(() => taken === 2, { message: 'the requests were not taken' });
  await owner.reconnect();
  t.same(await within(toOwner, 20_000), { lost: true }, "lost once the owner's connection came back");
  t.ok(Date.now() - sentAt < 20_000, `after ${Date.now() - sentAt} ms, not the request's 60 s`);
  t.same(await within(toOther, 20_000), { lost: true }, 'a request to another node waits for its own end');
  t.ok(Date.now() - sentAt >= 1_900, 'which is its timeout');
});
