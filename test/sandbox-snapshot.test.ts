import t from 'tap';
import { restoredSnapshot } from '../src/sandbox/snapshot.js';
import { VersionIsolate } from '../src/sandbox/version-isolate.js';

const CODE = `import { createMachine, assign } from 'xstate';
export default createMachine({
  id: 'm', predictableActionArguments: true, initial: 'a', context: { n: 0 },
  states: { a: { on: { GO: { target: 'b', actions: assign({ n: (c) => c.n + 1 }) } } }, b: { on: { GO: 'a' } } },
});
export const allowRead = () => true;
export const allowWrite = () => true;
`;

t.test("a step's snapshot leaves out the value and context it shares with the result, and gets them back", async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'ver_snap', code: CODE });
  t.teardown(() => vi.dispose());
  vi.start('k', { context: {} });
  const r = vi.send('k', { type: 'GO' });
  t.type(r.snapshot, 'string', 'the snapshot stays JSON text, for storage as it is');
  const stored = JSON.parse(r.snapshot) as { state: Record<string, unknown> };
  t.notOk('value' in stored.state);
  t.notOk('context' in stored.state);
  t.ok(r.sizes.contextBytes > 0 && r.sizes.restBytes > r.snapshot.length - 1, 'sizes are measured on the texts');
  const full = restoredSnapshot(r.snapshot, r.state, r.context);
  t.equal(full.state.value, 'b');
  t.same(full.state.context, { n: 1 });
  t.notOk('__fromHead' in full.state, 'the marker is gone');
  // A rebuilt actor goes on from there.
  vi.stop('k');
  vi.start('k', { snapshot: full });
  const next = vi.send('k', { type: 'GO' });
  t.equal(next.state, 'a');
  t.same(next.context, { n: 1 });
});

t.test('a machine without context keeps none after the round trip', async (t) => {
  const snapshot = JSON.stringify({ xstate: 4, state: { historyValue: {}, __fromHead: { value: true, context: false } } });
  const back = restoredSnapshot(snapshot, 'idle', {});
  t.same(back, { xstate: 4, state: { historyValue: {}, value: 'idle' } });
  t.notOk('context' in back.state, "the head's {} is not injected");
});

t.test('snapshots stored as objects before they became text are used as they are', async (t) => {
  const old = { xstate: 4 as const, state: { value: 'x', context: { n: 2 } } };
  t.equal(restoredSnapshot(old, 'ignored', { ignored: true }), old);
  const marked = { xstate: 4 as const, state: { historyValue: {}, __fromHead: { value: true, context: true } } };
  t.same(restoredSnapshot(marked, 'y', { n: 3 }), { xstate: 4, state: { historyValue: {}, value: 'y', context: { n: 3 } } });
});
