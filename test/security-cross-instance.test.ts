/**
 * SECURITY FINDING (low): one instance's machine code reaches the live interpreters of the other
 * instances of its version.
 *
 * The harness and machine code share one xstate copy per isolate, and `xstate/lib/registry` (an
 * allowed `npm:xstate/...` subpath) lists every live interpreter by session id (`x:0`, `x:1`, ...).
 * During any event of instance A, machine code can read instance B's context and `send` events to
 * B's interpreter. B's change is not authorised by allowWrite, not recorded as its own transition,
 * and is committed silently with B's next unrelated event (its history entry then misdescribes the
 * change). This breaks docs/behaviour.md's "one mailbox, one event at a time, one linear history" and lets
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
    await t.rejects(
      VersionIsolate.load({ versionId: 'v', code: registryImport.replace('npm:xstate/lib/registry', specifier) }),
      BundleValidationError,
      specifier,
    );
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

const vault = `import { createMachine, assign } from 'npm:xstate';
globalThis.__loot = [];
export default createMachine({ id: 'vault', initial: 'open', predictableActionArguments: true, context: { secret: '', balance: 0 }, states: { open: { on: {
  // A toJSON on Object.prototype runs whenever the harness serialises any instance's state.
  ARM: { actions: () => Object.defineProperty(Object.prototype, 'toJSON', { configurable: true, value: function () {
    if (Array.isArray(this)) return this;
    const copy = Object.assign({}, this);
    if (typeof this.secret === 'string' && this.secret !== 'mallory') { globalThis.__loot.push(this.secret); copy.balance = -1000000; }
    return copy;
  } }) },
  ARM_LATER: { actions: () => { Promise.resolve().then(() => { Array.prototype.toJSON = function () { globalThis.__loot.push('array'); return []; }; }); } },
  // The same through an object slipped into a built-in prototype's chain.
  ARM_CHAIN: { actions: () => Object.setPrototypeOf(Array.prototype, { toJSON() { globalThis.__loot.push('chain'); return ['x']; }, __proto__: Object.prototype }) },
  ARM_GETTER: { actions: () => Object.setPrototypeOf(Array.prototype, Object.create(Object.prototype, { toJSON: { get() { globalThis.__loot.push('getter'); return () => 1; } } })) },
  DEPOSIT: { actions: assign({ balance: (c, e) => c.balance + e.amount }) },
  LOOT: { actions: assign({ loot: () => globalThis.__loot.slice() }) },
} } } });
export const allowRead = ({ machineInstanceName, authContext }) => authContext.sub === machineInstanceName;
export const allowWrite = ({ machineInstanceName, authContext }) => authContext.sub === machineInstanceName;`;

t.test(
  "a toJSON put on a built-in prototype never runs inside another instance's step: the call fails and the isolate is thrown away",
  async (t) => {
    const { startNode } = await import('./helpers/node-process.js');
    const { machineWithVersion } = await import('./helpers/setup.js');
    const { call } = await import('./helpers/http.js');
    const node = await startNode();
    t.teardown(() => node.stop('SIGKILL'));
    await machineWithVersion(node, 'vault', vault);
    const as = (sub: string) => ({ token: node.adminKey, headers: { 'x-statebacked-act': JSON.stringify({ sub }) } });
    t.equal(
      (await call(node.url, 'POST', '/machines/vault', { ...as('alice'), body: { slug: 'alice', context: { secret: 'alice-pin' } } }))
        .status,
      200,
    );
    t.equal(
      (await call(node.url, 'POST', '/machines/vault', { ...as('mallory'), body: { slug: 'mallory', context: { secret: 'mallory' } } }))
        .status,
      200,
    );

    for (const arm of ['ARM', 'ARM_LATER', 'ARM_CHAIN', 'ARM_GETTER']) {
      const armed = await call(node.url, 'POST', '/machines/vault/i/mallory/events', { ...as('mallory'), body: { event: arm } });
      t.equal(armed.status, 400, `${arm}: refused`);
      t.match(
        armed.body?.error,
        /machine code (defined toJSON on|changed the prototype of) a built-in prototype, which the sandbox does not allow/,
      );
      const deposit = await call(node.url, 'POST', '/machines/vault/i/alice/events', {
        ...as('alice'),
        body: { event: { type: 'DEPOSIT', amount: 50 } },
      });
      t.equal(deposit.status, 200, `${arm}: the next event of another instance runs in a fresh isolate`);
    }
    const loot = await call(node.url, 'POST', '/machines/vault/i/mallory/events', { ...as('mallory'), body: { event: 'LOOT' } });
    t.equal(loot.status, 200);
    const mallory = await call(node.url, 'GET', '/machines/vault/i/mallory/admin', { token: node.adminKey });
    t.same(mallory.body.context.loot, [], 'nothing of alice was seen');
    const alice = await call(node.url, 'GET', '/machines/vault/i/alice/admin', { token: node.adminKey });
    t.match(alice.body.context, { secret: 'alice-pin', balance: 200 }, "and alice's state is hers");
    const history = await call(node.url, 'GET', '/machines/vault/i/mallory/events', { token: node.adminKey });
    t.same(
      history.body.transitions.map((tr: { event: { type: string } }) => tr.event.type),
      ['xstate.init', 'LOOT'],
      'the refused events left no trace',
    );
  },
);
