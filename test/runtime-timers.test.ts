import t, { type Test } from 'tap';
import type { FakeMachine } from './helpers/fake-sandbox.js';
import { historyOf, MACHINE, noAuth, ORG, runtimeHarness } from './helpers/runtime-harness.js';

/**
 * Durable timers in process (helpers/runtime-harness.ts): delayed events are stored with their due
 * time and fired by fireTimers once the injected clock passes it (an answer does not wait for them,
 * unless a child still runs when one comes due inside the settle budget); failed
 * deliveries are retried a retry delay later, then dropped; a paused instance's are not delivered.
 */
const AFTER_WAIT = 'xstate.after(60000)#fake.waiting';

const timed: FakeMachine = {
  initial: 'idle',
  context: { fired: 0 },
  states: {
    idle: {
      on: {
        START: { target: 'waiting' },
        QUICK: { target: 'quick' },
        SOON: { target: 'soon' },
        FLAKY: { target: 'flaky' },
        CHAIN: { target: 'chain' },
        CLOSE: { target: 'close' },
        STUCK: { target: 'stuck' },
      },
    },
    waiting: { after: { 60_000: { target: 'done', assign: (c) => ({ ...c, fired: (c.fired as number) + 1 }) } } },
    // due inside the 10 s settle budget while a child still runs: fired while the step settles
    quick: { invoke: { id: 'slow', doneAfterMs: 800 }, after: { 500: { target: 'quick-done' } } },
    'quick-done': {},
    // due inside the budget with nothing running: the answer does not wait for it
    soon: { after: { 500: { target: 'soon-done' } }, on: { POKE: { target: 'poked' } } },
    'soon-done': { on: { POKE: { target: 'poked-after' } } },
    poked: {},
    'poked-after': {},
    // a chain of delays, each armed when the one before fires
    chain: { after: { 100: { target: 'chain-c' } }, on: { POKE: { target: 'poked' } } },
    'chain-c': { after: { 100: { target: 'chain-d' } }, on: { POKE: { target: 'poked' } } },
    'chain-d': { after: { 100: { target: 'chain-e' } }, on: { POKE: { target: 'poked' } } },
    'chain-e': { on: { POKE: { target: 'poked-after' } } },
    // two delays 1 ms apart: the first leaves the state, which cancels the second
    close: { after: { 300: { target: 'close-b' }, 301: { target: 'close-c' } } },
    'close-b': {},
    'close-c': {},
    // a child that never finishes, and a delay after the settle budget
    stuck: { invoke: { id: 'never' }, after: { 200_000: { target: 'unstuck' } } },
    unstuck: {},
    flaky: { after: { 20_000: { throws: 'boom' } } },
    done: {},
  },
};

/** A runtime over the `timed` machine (helpers/runtime-harness.ts), closed when the test ends. */
const timedHarness = (t: Test, settings?: Parameters<typeof runtimeHarness>[0]['settings']) => {
  const h = runtimeHarness({ versions: { v1: timed }, ...(settings ? { settings } : {}) });
  t.teardown(() => h.close());
  return h;
};

const started = async (h: ReturnType<typeof runtimeHarness>, name: string, event: string) => {
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name, versionId: 'v1', context: {}, authContext: noAuth });
  return h.runtime.send(ORG, MACHINE, name, { type: event }, noAuth);
};

t.test('a delayed event beyond the settle budget is stored with its due time and fires once the clock passes it', async (t) => {
  const h = timedHarness(t);
  const sentAt = h.clock.now();
  const head = await started(h, 'x', 'START');
  t.equal(head.state, 'waiting', 'answered at once: nothing due inside the budget');
  t.same(
    head.pendingTimers.map((timer) => [timer.id, timer.dueAt]),
    [[AFTER_WAIT, sentAt + 60_000]],
  );
  t.same(h.timersPending, [sentAt + 60_000], 'the timer scheduler was told its due time');
  h.clock.ms += 59_999;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'x'), 'nothing-due');
  h.clock.ms += 1;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'x'), 'fired');
  const fired = h.runtime.head(ORG, MACHINE, 'x');
  t.equal(fired?.state, 'done');
  t.same(fired?.context, { fired: 1 });
  t.same(fired?.pendingTimers, []);
  t.same(historyOf(h, 'x'), ['xstate.init', 'START', AFTER_WAIT], 'recorded as an event of its own');
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'x'), 'nothing-due', 'fired once');
});

t.test('a delayed event due inside the settle budget does not hold the answer: the timers deliver it when due', async (t) => {
  const h = timedHarness(t);
  const sentAt = h.clock.now();
  const head = await started(h, 's', 'SOON');
  t.equal(head.state, 'soon', 'answered at once');
  t.equal(h.clock.now(), sentAt, 'without waiting on the clock');
  t.same(
    head.pendingTimers.map((timer) => timer.dueAt),
    [sentAt + 500],
  );
  t.same(h.timersPending, [sentAt + 500], 'the timer scheduler was told its due time');
  h.clock.ms += 500;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 's'), 'fired');
  t.equal(h.runtime.head(ORG, MACHINE, 's')?.state, 'soon-done');
  t.same(historyOf(h, 's'), ['xstate.init', 'SOON', 'xstate.after(500)#fake.soon'], 'recorded as an event of its own');
});

t.test('an event that comes after a delayed event was due runs after it, however late the timer scheduler is', async (t) => {
  const h = timedHarness(t);
  await started(h, 'p', 'SOON');
  h.clock.ms += 501; // (fireTimers is not called: the scheduler is late)
  const poked = await h.runtime.send(ORG, MACHINE, 'p', { type: 'POKE' }, noAuth);
  t.equal(poked.state, 'poked-after', 'the delayed event went first');
  t.same(historyOf(h, 'p'), ['xstate.init', 'SOON', 'xstate.after(500)#fake.soon', 'POKE'], 'each with its record, in due order');
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'p'), 'nothing-due', 'and it does not fire again');

  await started(h, 'q', 'SOON');
  h.clock.ms += 499;
  t.equal((await h.runtime.send(ORG, MACHINE, 'q', { type: 'POKE' }, noAuth)).state, 'poked', 'one not due yet waits');
});

t.test('a chain of delays a late scheduler left behind is delivered whole, in order, before a later event', async (t) => {
  const h = timedHarness(t);
  await started(h, 'c', 'CHAIN');
  h.clock.ms += 1_000; // (all three due: the second and third are armed only as the one before fires)
  t.equal((await h.runtime.send(ORG, MACHINE, 'c', { type: 'POKE' }, noAuth)).state, 'poked-after');
  t.same(historyOf(h, 'c'), [
    'xstate.init',
    'CHAIN',
    'xstate.after(100)#fake.chain',
    'xstate.after(100)#fake.chain-c',
    'xstate.after(100)#fake.chain-d',
    'POKE',
  ]);

  await started(h, 'd', 'CHAIN');
  h.clock.ms += 250;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'd'), 'fired');
  t.equal(h.runtime.head(ORG, MACHINE, 'd')?.state, 'chain-d', 'the scheduler, late, catches up to the time it fires at');
  t.same(historyOf(h, 'd').slice(2), ['xstate.after(100)#fake.chain', 'xstate.after(100)#fake.chain-c']);
});

t.test('a delayed event an earlier one cancelled is neither delivered nor recorded', async (t) => {
  const h = timedHarness(t);
  await started(h, 'x', 'CLOSE');
  h.clock.ms += 400; // (both were due when the scheduler came)
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'x'), 'fired');
  t.equal(h.runtime.head(ORG, MACHINE, 'x')?.state, 'close-b');
  t.same(historyOf(h, 'x'), ['xstate.init', 'CLOSE', 'xstate.after(300)#fake.close']);
});

t.test('the error event owed for a child stopped at the settle timeout comes before a delayed event', async (t) => {
  const h = timedHarness(t, { settleBudgetMs: 50 });
  const head = await started(h, 's', 'STUCK');
  t.same(head.stoppedChildren, ['never'], 'stopped at the budget');
  h.clock.ms += 200_000;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 's'), 'fired');
  const after = h.runtime.head(ORG, MACHINE, 's');
  t.equal(after?.state, 'unstuck');
  t.same(after?.stoppedChildren, [], 'no longer owed');
  t.same(historyOf(h, 's'), ['xstate.init', 'STUCK', 'error.platform.never', 'xstate.after(200000)#fake.stuck']);
});

t.test('a delayed event that comes due while a child still runs fires while the step settles, with a record of its own', async (t) => {
  const h = timedHarness(t);
  const before = h.clock.now();
  const head = await started(h, 'q', 'QUICK');
  t.equal(head.state, 'quick-done');
  t.equal(h.clock.now() - before, 500, 'the settle loop waited for it on the injected clock');
  const records = h.store.instances.listTransitions(ORG, MACHINE, 'q', 0, 10);
  t.same(
    records.map((r) => [r.event.type, r.state]),
    [
      ['xstate.init', 'idle'],
      ['QUICK', 'quick'],
      ['xstate.after(500)#fake.quick', 'quick-done'],
    ],
    'the event that led to the wait keeps the state it left',
  );
  t.equal(records[2]?.ts, before + 500, 'applied at its due time');
});

t.test('a delayed event whose delivery fails is retried a retry delay later, then dropped with a log line', async (t) => {
  const h = timedHarness(t, { timerRetryDelayMs: 30_000, timerMaxRetries: 2 });
  const head = await started(h, 'f', 'FLAKY');
  const [timer] = head.pendingTimers;
  t.ok(timer);
  if (!timer) return;
  h.clock.ms = timer.dueAt;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'f'), 'retry-later');
  let now = h.runtime.head(ORG, MACHINE, 'f');
  t.same(
    now?.pendingTimers.map((p) => p.dueAt),
    [h.clock.now() + 30_000],
    'moved a retry delay ahead',
  );
  t.same(now?.timerAttempts, { [timer.id]: 1 });
  t.equal(now?.seq, head.seq, 'a head-only change: no record');
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'f'), 'nothing-due', 'not due again before the delay');
  h.clock.ms += 30_000;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'f'), 'retry-later');
  t.same(h.runtime.head(ORG, MACHINE, 'f')?.timerAttempts, { [timer.id]: 2 });
  h.clock.ms += 30_000;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'f'), 'dropped', 'past its 2 retries');
  now = h.runtime.head(ORG, MACHINE, 'f');
  t.same(now?.pendingTimers, []);
  t.same(now?.timerAttempts, {});
  t.equal(now?.state, 'flaky');
  t.same(historyOf(h, 'f'), ['xstate.init', 'FLAKY'], 'no failed delivery left a record');
  t.same(
    h.logs.lines.map((line) => line.level),
    ['warn', 'warn', 'error'],
  );
  t.match(h.logs.lines.at(-1)?.message, /^dropped delayed event xstate\.after\(20000\)#fake\.flaky after 3 failed deliveries: .*boom/);
  t.same(h.store.instances.getInstance(ORG, MACHINE, 'f'), now, 'stored as held');
});

t.test('a paused instance rejects events and its delayed events are dropped, not delivered', async (t) => {
  const h = timedHarness(t, { timerRetryDelayMs: 1_000, timerMaxRetries: 1 });
  const head = await started(h, 'p', 'START');
  await h.runtime.setStatus(ORG, MACHINE, 'p', 'paused');
  t.equal(h.store.instances.getInstance(ORG, MACHINE, 'p')?.status, 'paused');
  await t.rejects(h.runtime.send(ORG, MACHINE, 'p', { type: 'START' }, noAuth), { status: 409, code: 'invalid-state' });
  h.clock.ms = (head.pendingTimers[0]?.dueAt ?? 0) + 1;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'p'), 'retry-later');
  t.match(h.logs.lines[0]?.message, /the instance is paused/);
  h.clock.ms += 1_000;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'p'), 'dropped');
  await h.runtime.setStatus(ORG, MACHINE, 'p', 'running');
  h.clock.ms += 120_000;
  t.equal(await h.runtime.fireTimers(ORG, MACHINE, 'p'), 'nothing-due', 'gone for good once running again');
  const after = h.runtime.head(ORG, MACHINE, 'p');
  t.equal(after?.state, 'waiting', 'the delayed event never ran');
  t.same(after?.context, { fired: 0 });
  t.same(historyOf(h, 'p'), ['xstate.init', 'START']);
});

const chained: FakeMachine = {
  initial: 'idle',
  context: {},
  states: {
    idle: { on: { GO: { target: 'waiting' }, SLOW: { target: 'first' } } },
    waiting: { after: { 1: { target: 'done' } } },
    // (children that never finish: the step settles only when its budget runs out)
    first: { invoke: { id: 'c1' }, after: { 3: { target: 'second' } } },
    second: { invoke: { id: 'c2' }, after: { 7: { target: 'third' } } },
    done: {},
    third: {},
  },
};

/**
 * `event` sent to a new instance of `chained` under a settle budget of `budgetMs`, with the clock moving
 * on `tickMs` each time it is read from the send on (time passing while the step runs): the answer, the
 * time the event was sent at, and the history.
 */
const sentWhileTimePasses = async (t: Test, budgetMs: number, tickMs: number, event: string) => {
  const h = runtimeHarness({ versions: { v1: chained }, settings: { settleBudgetMs: budgetMs } });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'i', versionId: 'v1', context: {}, authContext: noAuth });
  const read = h.clock.now.bind(h.clock);
  h.clock.now = () => {
    const at = read();
    h.clock.ms += tickMs;
    return at;
  };
  const sentAt = h.clock.ms;
  const head = await h.runtime.send(ORG, MACHINE, 'i', { type: event }, noAuth);
  return { head, sentAt, dueAt: head.pendingTimers.map((timer) => timer.dueAt), history: historyOf(h, 'i') };
};

t.test(
  'without a settle budget, a delayed event due 1 ms after the event is not taken in though the clock moved on meanwhile',
  async (t) => {
    // (seen in the differential test: a step after a restart took over a millisecond, and the event's
    // answer included an `after` of 1 ms fired; the budget was counted from a later reading of the clock)
    const { head, sentAt, dueAt, history } = await sentWhileTimePasses(t, 0, 1, 'GO');
    t.equal(head.state, 'waiting', 'answered before the delayed event');
    t.same(dueAt, [sentAt + 1], 'which is left to the timers, due 1 ms after the event');
    t.same(history, ['xstate.init', 'GO']);
  },
);

t.test('a step that outlasts its settle budget takes in the delayed events due inside the budget, not those due after it', async (t) => {
  // (each reading of the clock 10 ms after the one before: the 5 ms budget has run out before the loop looks)
  const { head, sentAt, dueAt, history } = await sentWhileTimePasses(t, 5, 10, 'SLOW');
  t.equal(head.state, 'second', 'the one due at 3 ms fired; the one due at 10 ms did not');
  t.same(dueAt, [sentAt + 10]);
  t.same(history, ['xstate.init', 'SLOW', 'xstate.after(3)#fake.first']);
});
