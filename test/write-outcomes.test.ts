import t from 'tap';
import { WriteOutcomes } from '../src/domain/write-outcomes.js';

t.test('a node whose last few writes all failed, none succeeding since, says so until one succeeds or they age', async (t) => {
  let now = 10_000;
  const outcomes = new WriteOutcomes({ windowMs: 3_000, minFailures: 3, now: () => now });
  t.equal(outcomes.problem(), undefined, 'no writes: nothing to say');
  outcomes.failed('a');
  outcomes.failed('b');
  t.equal(outcomes.problem(), undefined, 'two failures are not enough');
  now += 100;
  outcomes.failed('fenced: the log holds another entry at its position');
  t.match(outcomes.problem(), /the last 3 writes through this node failed within 3 s and none succeeded \(the last: fenced/);
  outcomes.succeeded();
  t.equal(outcomes.problem(), undefined, 'one that succeeds clears it');
  for (const reason of ['x', 'y', 'z']) outcomes.failed(reason);
  t.ok(outcomes.problem());
  now += 3_500;
  t.equal(outcomes.problem(), undefined, 'failures older than the window are forgotten (a balancer that stopped sending tries again)');
  outcomes.failed('x');
  outcomes.succeeded();
  outcomes.failed('y');
  outcomes.failed('z');
  t.equal(outcomes.problem(), undefined, 'a success among them: two failures since, not enough');
});
