/**
 * The usage meter: counts in memory, written once a second; a write that failed as uncertain (a
 * cluster's log may or may not have taken it) is counted once the store finds it was made, and not
 * otherwise (the retry of its request, answered from the history, counts nothing).
 */
import t from 'tap';
import { unavailable } from '../src/domain/errors.js';
import { UncertainWriteError } from '../src/store/instance-store.js';
import { UsageMeter } from '../src/runtime/usage-meter.js';
import { tempNodeStore } from './helpers/temp-store.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

t.test('a write that failed as uncertain is counted once it turns out made, and only then', async (t) => {
  const store = tempNodeStore(t);
  const meter = new UsageMeter(store.instances, quiet, 10);
  meter.transitions('org_a', 'm', 1);
  let made!: (value: boolean) => void;
  let notMade!: (value: boolean) => void;
  const failed = (error: Error, count: number) =>
    meter.countedIfMadeLate(Promise.reject(error), 'org_a', 'm', count).catch(() => undefined);
  await failed(new UncertainWriteError('lost answer', () => new Promise((resolve) => (made = resolve))), 3);
  await failed(new UncertainWriteError('lost answer', () => new Promise((resolve) => (notMade = resolve))), 5);
  await failed(unavailable('a plain 503: nothing was written'), 7);
  const transitions = async () => (await meter.months('org_a', 1))[0]?.transitions;
  t.equal(await transitions(), 1, 'not counted while the store cannot tell');
  made(true);
  notMade(false);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(await transitions(), 4, 'the one made counted; the one not made, and the plain 503, not');
});

t.test("reading the months right after a timer's flush began sees what that flush was still writing", async (t) => {
  const store = tempNodeStore(t);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const slow = Object.create(store.instances) as typeof store.instances;
  slow.addUsage = async (...args) => {
    await held;
    return store.instances.addUsage(...args);
  };
  const meter = new UsageMeter(slow, quiet, 10);
  meter.transitions('org_a', 'm', 2);
  await new Promise((resolve) => setTimeout(resolve, 30)); // the timer's flush took the counts and waits
  const months = meter.months('org_a', 1);
  setTimeout(release, 20);
  t.same(
    (await months)[0]?.machines?.find((m) => m.machine === 'm'),
    { machine: 'm', transitions: 2, reads: 0 },
    'the counts of the flush under way are in the answer',
  );
});
