/**
 * SECURITY FINDING (low): one instance's machine code reaches the live interpreters of the other
 * instances of its version.
 *
 * The harness and machine code share one xstate copy per isolate, and `xstate/lib/registry` (an
 * allowed `npm:xstate/...` subpath) lists every live interpreter by session id (`x:0`, `x:1`, ...).
 * During any event of instance A, machine code can read instance B's context and `send` events to
 * B's interpreter. B's change is not authorised by allowWrite, not recorded as its own transition,
 * and is committed silently with B's next unrelated event (its history entry then misdescribes the
 * change). This breaks the README's "one mailbox, one event at a time, one linear history" and lets
 * a bug (or an event payload naming a session) in one instance corrupt others.
 *
 * Fixed: the registry import is refused, and the harness keeps interpreters in a private table
 * limited to the actor that is running; these tests keep it so.
 */
import t from 'tap';
import { BundleValidationError, VersionIsolate } from '../src/sandbox/index.js';
import { ALLOW_ALL } from './fixtures/security/machines.js';

const registryImport = `import { createMachine } from 'npm:xstate';
import { registry } from 'npm:xstate/lib/registry';
export default createMachine({ id: 'm', initial: 'a', states: { a: {} } });
${ALLOW_ALL}`;

t.test("xstate's registry of live interpreters cannot be imported", async (t) => {
  for (const specifier of ['npm:xstate/lib/registry', 'xstate/es/registry.js', 'npm:xstate@4/lib/serviceScope']) {
    await t.rejects(VersionIsolate.load({ versionId: 'v', code: registryImport.replace('npm:xstate/lib/registry', specifier) }), BundleValidationError, specifier);
  }
});

// xstate v4 looks a string send target up in its registry when it is not a child: session ids
// ('x:0', 'x:1', ...) must not reach other instances' interpreters.
const bySessionId = `import { createMachine, assign, send } from 'npm:xstate';
const poke = Array.from({ length: 50 }, (_, i) => send({ type: 'SET', v: 'written by A' }, { to: 'x:' + i }));
export default createMachine({ id: 'm', predictableActionArguments: true, initial: 'a', context: {}, states: { a: { on: {
  POKE: { actions: poke },
  SET: { actions: assign((c, e) => ({ secret: e.v })) },
  NOOP: {},
} } } });
${ALLOW_ALL}`;

t.test("an instance cannot drive another instance's live interpreter by session id", async (t) => {
  const vi = await VersionIsolate.load({ versionId: 'v', code: bySessionId });
  t.teardown(() => vi.dispose());
  vi.start('org/m/a', { context: { secret: 'A' } });
  vi.start('org/m/b', { context: { secret: 'B' } });
  try {
    vi.send('org/m/a', { type: 'POKE' });
  } catch {
    // a send to an unknown target may fail A's step; what matters is that B is untouched
  }
  const b = vi.send('org/m/b', { type: 'NOOP' });
  t.equal(b.context.secret, 'B', `B's context was changed by A's event: ${JSON.stringify(b.context)}`);
});
