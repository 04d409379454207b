/**
 * FailedApplies (src/store/jetstream/failed-applies.ts): a followed entry that failed to apply holds back
 * the later entries of its instance received by the same partition copy, until it is delivered again or
 * passed by as held.
 */
import t from 'tap';
import { FailedApplies } from '../src/store/jetstream/failed-applies.js';

t.test('later entries of the instance wait for the failed one; the others do not', async (t) => {
  const failed = new FailedApplies<string>();
  failed.note('o/m/i', 10, 'copy');
  t.equal(failed.waitsFor('o/m/i', 12, 'copy'), 10, 'a later entry of the instance waits for entry 10');
  t.equal(failed.waitsFor('o/m/j', 12, 'copy'), undefined, "another instance's does not");
  failed.note('o/m/i', 12, 'copy');
  t.equal(failed.waitsFor('o/m/i', 13, 'copy'), 10, 'the earliest failure is the one waited for');
  t.equal(failed.waitsFor('o/m/i', 10, 'copy'), undefined, 'the failed entry itself, delivered again, goes on');
  t.equal(failed.waitsFor('o/m/i', 12, 'copy'), undefined, 'and the ones after it then');
});

t.test('a failure is over once its entry is passed by as held, or the partition is followed by another copy', async (t) => {
  const failed = new FailedApplies<string>();
  failed.note('o/m/i', 10, 'copy');
  failed.passed('o/m/i', 11);
  t.equal(failed.waitsFor('o/m/i', 12, 'copy'), 10, 'passing a later entry by does not end it');
  failed.passed('o/m/i', 10);
  t.equal(failed.waitsFor('o/m/i', 12, 'copy'), undefined, 'passing the failed one by does (mended past it meanwhile)');
  failed.note('o/m/i', 10, 'copy');
  t.equal(
    failed.waitsFor('o/m/i', 12, 'another copy'),
    undefined,
    "a copy made since (the partition given up and taken again) does not wait for the old one's failure",
  );
  t.equal(failed.waitsFor('o/m/i', 12, 'copy'), undefined, 'and the old failure is forgotten');
});
