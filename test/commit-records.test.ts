import t from 'tap';
import { billedTransitions, checkedSize, keptTimerAttempts, stampTimes } from '../src/runtime/commit-records.js';
import type { StepResult } from '../src/sandbox/index.js';
import type { TransitionRecord } from '../src/store/instance-store.js';

/** The pure parts of a commit, alone. */
const record = (seq: number, ts: number): TransitionRecord => ({ seq, createdAt: '', ts, event: { type: 'E' }, state: 'a' });

t.test("records are dated when applied, strictly after the instance's last, even when the clock stepped back", async (t) => {
  const records = [record(4, 2_000), record(5, 1_500), record(6, 3_000)];
  stampTimes(records, 2_500);
  t.same(
    records.map((r) => r.ts),
    [2_501, 2_502, 3_000],
  );
  t.equal(records[2]?.createdAt, new Date(3_000).toISOString());
});

t.test('retry counts are kept for pending timers only', async (t) => {
  t.same(keptTimerAttempts({ a: 1, b: 2 }, [{ kind: 'event', id: 'b', dueAt: 1, event: { type: 'E' } }]), { b: 2 });
});

t.test('context and the rest of the state within their limits; 400s beyond', async (t) => {
  const result = (contextBytes: number, restBytes: number) => ({ sizes: { contextBytes, restBytes } }) as unknown as StepResult;
  const limits = { maxContextBytes: 100, maxPersistedBytes: 1_000 };
  t.same(checkedSize(result(100, 1_000), limits), { contextBytes: 100, stateBytes: 1_100 });
  t.throws(() => checkedSize(result(101, 0), limits), { code: 'context-too-large', status: 400 });
  t.throws(() => checkedSize(result(0, 1_001), limits), { code: 'state-too-large', status: 400 });
});

t.test('billed: a transition per record, one per 100 KB of context, half per index write', async (t) => {
  t.equal(billedTransitions(2, 250 * 1024, 3), 2 + 2 + 1.5);
  t.equal(billedTransitions(1, 0, 0), 1);
});
