import t from 'tap';
import { JetStreamOpLog } from '../src/store/jetstream/op-log.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

/** The replicated operation log on a real 3-server NATS cluster (R3): convergence, own results, restart. */

const skip = natsMissing();
type Op = { kind: 'put'; key: string; value: number } | { kind: 'claim'; key: string };

/** A node's local copy: a map, and claims that succeed once per key (a deterministic failure after). */
const replica = () => {
  const values = new Map<string, number>();
  const apply = (op: Op) => {
    if (op.kind === 'put') {
      values.set(op.key, op.value);
      return values.size;
    }
    if (values.has(`claimed:${op.key}`)) throw new Error(`${op.key} is taken`);
    values.set(`claimed:${op.key}`, 1);
    return true;
  };
  return { values, apply };
};

t.test('every node applies every operation in one order; a submitter gets its own result', { skip }, async (t) => {
  const nats = await startNats(3);
  t.teardown(() => nats.stop());
  const [one, two] = await Promise.all([connectTo(nats, 'one'), connectTo(nats, 'two')]);
  t.teardown(() => Promise.all([one.close(), two.close()]));
  const fail = (message: string, error: unknown) => t.fail(`${message}: ${String(error)}`);
  const a = replica();
  const b = replica();
  const logA = await JetStreamOpLog.open<Op>(one, { cluster: 'c', name: 'META', replicas: 3, from: 1 }, a.apply, fail);
  const logB = await JetStreamOpLog.open<Op>(two, { cluster: 'c', name: 'META', replicas: 3, from: 1 }, b.apply, fail);
  const submitted = await Promise.all(
    Array.from({ length: 100 }, (_, i) => (i % 2 ? logA : logB).submit({ kind: 'put', key: `k${i % 10}`, value: i })),
  );
  t.equal(submitted.length, 100);
  await Promise.all([logA.catchUp(), logB.catchUp()]);
  t.equal(a.values.get('k3'), b.values.get('k3'), 'both copies took the writes in the same order');
  // Read your own write: what a submit resolved with is already applied on that node.
  t.equal(await logA.submit({ kind: 'put', key: 'mine', value: 7 }), a.values.size, 'the submitter gets what applying it returned');
  t.equal(a.values.get('mine'), 7, 'applied on the submitter when its submit resolves');
  // Two nodes race to claim one name: exactly one wins, the other gets the deterministic error.
  const race = await Promise.allSettled([logA.submit({ kind: 'claim', key: 'x' }), logB.submit({ kind: 'claim', key: 'x' })]);
  t.same(race.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
  t.match(
    race.find((r) => r.status === 'rejected'),
    { reason: { message: 'x is taken' } },
  );
  await logB.catchUp();
  t.same([...a.values].sort(), [...b.values].sort(), 'the copies are equal');

  // With peers set, a submit resolves once the other live members applied it too.
  logA.setPeers({ nodeId: 'a', members: () => ['a', 'b'], waitMs: 5_000 });
  logB.setPeers({ nodeId: 'b', members: () => ['a', 'b'], waitMs: 5_000 });
  await logA.submit({ kind: 'put', key: 'everywhere', value: 1 });
  t.equal(b.values.get('everywhere'), 1, "applied on b by the time a's submit resolved");
  const started = Date.now();
  logA.setPeers({ nodeId: 'a', members: () => ['a', 'b', 'gone'], waitMs: 300 });
  await logA.submit({ kind: 'put', key: 'late', value: 2 });
  t.ok(Date.now() - started >= 250, 'a member that never answers is waited for only so long');
  logA.setPeers({ nodeId: 'a', members: () => ['a'], waitMs: 300 });

  // A node that was away resumes from the first sequence it had not applied.
  const resumedFrom = logB.appliedSeq + 1;
  await logB.close();
  for (let i = 0; i < 20; i++) await logA.submit({ kind: 'put', key: `later${i}`, value: i });
  const logB2 = await JetStreamOpLog.open<Op>(two, { cluster: 'c', name: 'META', replicas: 3, from: resumedFrom }, b.apply, fail);
  await logB2.catchUp();
  t.same([...a.values].sort(), [...b.values].sort(), 'caught up after its absence');
  await Promise.all([logA.close(), logB2.close()]);
});

t.test('a change JetStream cannot take (no quorum) is a 503 that says it may or may not be stored', { skip }, async (t) => {
  const nats = await startNats(3);
  t.teardown(() => nats.stop());
  const nc = await connectTo(nats, 'lonely');
  t.teardown(() => nc.close());
  const copy = replica();
  // (the follower's complaints while the servers are gone are expected)
  const log = await JetStreamOpLog.open<Op>(nc, { cluster: 'q', name: 'META', replicas: 3, from: 1 }, copy.apply, () => undefined);
  await log.submit({ kind: 'put', key: 'before', value: 1 });
  // The client is connected to server 0: the two others gone, the stream has no quorum.
  await Promise.all([nats.kill(1, 'SIGKILL'), nats.kill(2, 'SIGKILL')]);
  const started = Date.now();
  await t.rejects(log.submit({ kind: 'put', key: 'during', value: 2 }), {
    status: 503,
    code: 'unavailable',
    message: /may or may not have been stored/,
  });
  t.ok(Date.now() - started < 30_000, `answered in ${Date.now() - started} ms`);
  await log.close();
});
