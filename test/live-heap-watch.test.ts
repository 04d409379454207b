import t from 'tap';
import { LiveHeapWatch, REARM_AFTER_CALLS, SAMPLE_EVERY } from '../src/sandbox/worker/live-heap-watch.js';
import { liveActorCap } from '../src/runtime/instance-runtime.js';

const MB = 1024 * 1024;

/** Runs `calls` steps on the watch and returns the reports (bytes held) it made. */
const steps = (watch: LiveHeapWatch, calls: number): number[] => {
  const reports: number[] = [];
  for (let i = 0; i < calls; i++) {
    const held = watch.afterStep();
    if (held !== undefined) reports.push(held);
  }
  return reports;
};

t.test("the heap is read every few steps, and what the loaded version held is not the live actors'", async (t) => {
  let heap = 3 * MB;
  let reads = 0;
  const watch = new LiveHeapWatch(8 * MB, () => (reads++, heap));
  t.equal(reads, 1, 'the baseline is read once, at load');
  heap = 10 * MB;
  t.same(steps(watch, SAMPLE_EVERY - 1), [], 'nothing read before the sample is due');
  t.equal(reads, 1);
  t.same(steps(watch, 1), [], '7 MB above the baseline is within 8 MB');
  t.equal(reads, 2);
  heap = 12 * MB;
  t.same(steps(watch, SAMPLE_EVERY), [9 * MB], 'over the budget: reported with what the actors hold');
});

t.test('after a report, the next comes when the heap reads within the budget again, or after many calls over it', async (t) => {
  let heap = 0;
  const watch = new LiveHeapWatch(8 * MB, () => heap);
  heap = 9 * MB;
  t.same(steps(watch, SAMPLE_EVERY), [9 * MB]);
  t.same(steps(watch, SAMPLE_EVERY * 10), [], "still over (the evicted actors' garbage not yet collected): not again at once");
  heap = 7 * MB;
  t.same(steps(watch, SAMPLE_EVERY * 3), [7 * MB], 'back within: said once (the node lifts its cap)');
  heap = 9 * MB;
  t.same(steps(watch, SAMPLE_EVERY), [9 * MB], 'over again: reported');
  t.same(steps(watch, REARM_AFTER_CALLS), [9 * MB], 'over for REARM_AFTER_CALLS calls: reported again (what was evicted was not enough)');
});

t.test('the cap keeps as many live actors as would hold three quarters of the budget', async (t) => {
  t.equal(liveActorCap(1000, 8 * MB, 8 * MB), 750);
  t.equal(liveActorCap(1000, 16 * MB, 8 * MB), 375);
  t.equal(liveActorCap(0, 9 * MB, 8 * MB), 0);
});
