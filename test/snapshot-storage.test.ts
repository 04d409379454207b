import t from 'tap';
import { withHeadCopies, withoutHeadCopies } from '../src/runtime/snapshot-storage.js';

t.test('the stored snapshot drops the copies the head keeps, and gets them back', async (t) => {
  const snapshot = { xstate: 4 as const, state: { value: { a: 'b' }, context: { n: 1 }, historyValue: { current: 'a' } } };
  const stored = withoutHeadCopies(snapshot);
  t.notOk('value' in stored.state);
  t.notOk('context' in stored.state);
  t.same(withHeadCopies(stored, { a: 'b' }, { n: 1 }), snapshot);
});

t.test('a machine without context keeps none after the round trip', async (t) => {
  const snapshot = { xstate: 4 as const, state: { value: 'idle', historyValue: {} } };
  const back = withHeadCopies(withoutHeadCopies(snapshot), 'idle', {});
  t.same(back, snapshot);
  t.notOk('context' in back.state, 'the head\'s {} is not injected');
});

t.test('snapshots stored before the change are used as they are', async (t) => {
  const old = { xstate: 4 as const, state: { value: 'x', context: { n: 2 } } };
  t.equal(withHeadCopies(old, 'ignored', { ignored: true }), old);
});
