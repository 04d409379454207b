import t from 'tap';
import type { PendingTimer } from '../src/domain/machine-state.js';
import type { InstanceHead } from '../src/store/instance-store.js';
import { timerRetryPlan } from '../src/runtime/timer-retries.js';

/** The retry policy of failed delayed events, alone: no server, no clock but the one given. */
const timer = (id: string, dueAt: number): PendingTimer => ({ kind: 'event', id, dueAt, event: { type: `E_${id}` } });
const head = (pendingTimers: PendingTimer[], timerAttempts: Record<string, number> = {}): InstanceHead => ({
  orgId: 'o',
  machine: 'm',
  name: 'i',
  createdAt: '',
  versionId: 'ver_1',
  status: 'running',
  seq: 3,
  ts: 1_000,
  state: 'a',
  context: {},
  tags: [],
  done: false,
  snapshot: '{}',
  pendingTimers,
  stoppedChildren: [],
  timerAttempts,
});
const settings = { retryDelayMs: 500, maxRetries: 2 };

t.test('a failed timer moves a retry delay past now and counts its attempt; the others stay as they were', async (t) => {
  const a = timer('a', 900),
    b = timer('b', 5_000);
  const plan = timerRetryPlan(head([a, b]), [a], 'the instance is paused', settings, 1_000);
  t.same(plan.next.pendingTimers, [{ ...a, dueAt: 1_500 }, b]);
  t.same(plan.next.timerAttempts, { a: 1 });
  t.equal(plan.dropped, false);
  t.same(plan.lines, [
    {
      level: 'warn',
      message: 'could not deliver delayed event E_a (attempt 1): the instance is paused; retrying in 500 ms',
      attrs: { event: 'E_a', attempts: 1 },
    },
  ]);
  t.equal(plan.next.seq, 3, 'a head-only change');
});

t.test('past its retries a timer is dropped, its count forgotten, and the drop said at error level', async (t) => {
  const a = timer('a', 900),
    b = timer('b', 950);
  const plan = timerRetryPlan(head([a, b], { a: 2, b: 1 }), [a, b], 'machine code threw', settings, 1_000);
  t.same(plan.next.pendingTimers, [{ ...b, dueAt: 1_500 }]);
  t.same(plan.next.timerAttempts, { b: 2 });
  t.equal(plan.dropped, true);
  t.same(
    plan.lines.map((l) => [l.level, l.message]),
    [
      ['error', 'dropped delayed event E_a after 3 failed deliveries: machine code threw'],
      ['warn', 'could not deliver delayed event E_b (attempt 2): machine code threw; retrying in 500 ms'],
    ],
  );
});

t.test('the head given is not changed', async (t) => {
  const a = timer('a', 900);
  const before = head([a], { a: 1 });
  const copy = structuredClone(before);
  timerRetryPlan(before, [a], 'x', settings, 1_000);
  t.same(before, copy);
});

t.test('timer ids named like members of every object (constructor, __proto__) are counted and dropped like any other', async (t) => {
  const c = timer('constructor', 900),
    p = timer('__proto__', 900);
  let current = head([c, p]);
  for (let round = 1; round <= 2; round++) {
    const plan = timerRetryPlan(current, current.pendingTimers, 'x', settings, 1_000);
    t.same(plan.next.timerAttempts, JSON.parse(`{"constructor":${round},"__proto__":${round}}`), `round ${round}: counted`);
    current = plan.next;
  }
  const last = timerRetryPlan(current, current.pendingTimers, 'x', settings, 1_000);
  t.same(last.next.pendingTimers, [], 'both dropped after their retries');
  t.same(Object.keys(last.next.timerAttempts), []);
  t.equal(last.dropped, true);
});
