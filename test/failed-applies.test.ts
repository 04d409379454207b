/**
 * FailedApplies (src/store/jetstream/failed-applies.ts): a followed entry that failed to apply holds back
 * the later entries of its instance received by the same partition copy, until it comes again (by its
 * sequence or by the position it names), is passed by as held, the instance is replaced from the
 * leader, or WAIT_MS has passed.
 */
import t from 'tap';
import { FailedApplies } from '../src/store/jetstream/failed-applies.js';

t.test('later entries of the instance wait for the failed one; the others do not', async (t) => {
  const failed = new FailedApplies<string>();
  failed.note('o/m/i', 10, 9, 'copy');
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), 10, 'a later entry of the instance waits for entry 10');
  t.equal(failed.waitsFor('o/m/j', 12, 3, 'copy'), undefined, "another instance's does not");
  failed.note('o/m/i', 12, 10, 'copy');
  t.equal(failed.waitsFor('o/m/i', 13, 12, 'copy'), 10, 'the earliest failure is the one waited for');
  t.equal(failed.waitsFor('o/m/i', 10, 9, 'copy'), undefined, 'the failed entry itself, delivered again, goes on');
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), undefined, 'and the ones after it then');
});

t.test(
  'the failed entry comes again at another sequence (read from the leader, which numbers it otherwise): by the position it names',
  async (t) => {
    const failed = new FailedApplies<string>();
    failed.note('o/m/i', 10, 9, 'copy');
    t.equal(failed.waitsFor('o/m/i', 43, 9, 'copy'), undefined, 'the entry naming the same position goes on');
    t.equal(failed.waitsFor('o/m/i', 44, 43, 'copy'), undefined, 'and the later ones');
  },
);

t.test('a failure is over once passed by as held, once the instance is replaced, with another copy, or after a while', async (t) => {
  let now = 0;
  const failed = new FailedApplies<string>(() => now);
  failed.note('o/m/i', 10, 9, 'copy');
  failed.passed('o/m/i', 11);
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), 10, 'passing a later entry by does not end it');
  failed.passed('o/m/i', 10);
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), undefined, 'passing the failed one by does (mended past it meanwhile)');
  failed.note('o/m/i', 10, 9, 'copy');
  failed.over('o/m/i');
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), undefined, 'the instance replaced from the leader ends it');
  failed.note('o/m/i', 10, 9, 'copy');
  t.equal(
    failed.waitsFor('o/m/i', 12, 10, 'another copy'),
    undefined,
    "a copy made since (the partition taken again) does not wait for the old one's failure",
  );
  failed.note('o/m/i', 10, 9, 'copy');
  now = 9_999;
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), 10, 'within the wait');
  now = 10_000;
  t.equal(failed.waitsFor('o/m/i', 12, 10, 'copy'), undefined, 'not past it: an instance never waits for good');
});
