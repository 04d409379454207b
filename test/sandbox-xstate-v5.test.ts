/**
 * XState v5 machines in the sandbox: module resolution of the shared v5 copy, telling v4 and v5
 * machines apart, and stepping v5 actors with the behaviour v4 actors have (context, tags, done,
 * timers as host timers that survive a restore, settling children, persistent sends, failures).
 */
import t from 'tap';
import {
  BundleValidationError,
  MachineCodeError,
  VersionIsolate,
  restoredSnapshot,
  validateBundle,
  type CapturedLog,
  type StepResult,
} from '../src/sandbox/index.js';
import { importing5, bundled5, TRAFFIC5, SETTLE5, TIMERS5 } from './fixtures/xstate-v5/machines.js';

async function load(code: string, logs?: CapturedLog[]): Promise<VersionIsolate> {
  const vi = await VersionIsolate.load({ versionId: 'v5-ver', code, ...(logs ? { onLog: (e: CapturedLog) => logs.push(e) } : {}) });
  t.teardown(() => vi.dispose());
  return vi;
}

/** A restore of the actor from what a commit of `r` stores (as the runtime does after an eviction). */
const restoreOf = (r: StepResult) => ({
  name: 'k',
  snapshot: r.snapshot,
  value: r.state,
  context: r.context,
  pendingTimers: r.pendingTimers.filter((x) => x.kind === 'event'),
});

t.test('xstate 5 specifiers resolve to the shared v5 copy; bare xstate stays v4', async (t) => {
  for (const specifier of ['xstate@5', 'npm:xstate@5', 'npm:xstate@^5.33.0', 'xstate@5.x', 'npm:xstate@~5']) {
    const v = await validateBundle(importing5(TRAFFIC5, { specifier }));
    t.same(v, { ok: true, xstateMajor: 5 }, specifier);
  }
  const subpaths = `import { createMachine } from 'xstate@5';
import { assign } from 'npm:xstate@5/actions';
import { not } from 'xstate@5/guards';
import { fromPromise } from 'xstate@5/actors';
export default createMachine({ id: 's', initial: 'a', context: { x: 0 }, states: { a: { on: { X: { guard: not(() => false), actions: assign({ x: 1 }) } } } } });
export const allowRead = () => true, allowWrite = () => true;`;
  const vi = await load(subpaths);
  t.equal(vi.info.machine, 'v5');
  t.equal(vi.start('k', { context: {} }).context.x, 0);
  t.equal(vi.send('k', { type: 'X' }).context.x, 1, 'actions and guards of the subpaths are the shared copy’s');
  for (const specifier of ['xstate@5/lib/utils', 'xstate@5/es/registry', 'xstate@6', 'npm:xstate@3']) {
    const v = await validateBundle(subpaths.replace("'xstate@5/guards'", `'${specifier}'`));
    t.equal(v.ok, false, specifier);
    if (!v.ok) t.match(v.error, specifier);
  }
  const v4 = await validateBundle(`import { createMachine } from 'npm:xstate';
export default createMachine({ id: 'four', initial: 'a', states: { a: {} } });
export const allowRead = () => true, allowWrite = () => true;`);
  t.same(v4, { ok: true, xstateMajor: 4 }, 'npm:xstate is v4');
});

t.test('malformed v5 machines and default exports that are no machine are refused with a reason', async (t) => {
  const badTarget = await validateBundle(
    importing5(`export default createMachine({ id: 'bad', initial: 'a', states: { a: { on: { GO: 'nowhere' } } } });`),
  );
  t.equal(badTarget.ok, false);
  if (!badTarget.ok) t.match(badTarget.error, /the bundle threw while loading: .*Child state 'nowhere' does not exist on 'bad'/s);
  const badInitial = await validateBundle(
    importing5(`export default createMachine({ id: 'bad', initial: 'missing', states: { a: {} } });`),
  );
  t.equal(badInitial.ok, false, 'an initial state that does not exist');
  if (!badInitial.ok) t.match(badInitial.error, /not a usable XState v5 machine: .*missing/s);
  const lookalike = await validateBundle(importing5(`export default { getInitialSnapshot() {}, transition() {} };`));
  t.equal(lookalike.ok, false);
  if (!lookalike.ok) t.match(lookalike.error, /not an XState machine: expected the result of createMachine from xstate 4 .* or xstate 5/);
  const noAuthorizers = await validateBundle(importing5(TRAFFIC5, { authorizers: '' }));
  t.same(noAuthorizers, { ok: false, error: 'allowRead must be an exported function' });
});

t.test('start merges the given context over the machine’s, tags, parallel states, done and output', async (t) => {
  const vi = await load(importing5(TRAFFIC5));
  t.same(vi.defaultContext(), { count: 0, owner: 'nobody' });
  let r = vi.start('k1', { context: { owner: 'me', extra: true } });
  t.match(r, { state: 'off', context: { count: 0, owner: 'me', extra: true }, tags: ['idle'], done: false, changed: true, transitions: 1 });
  r = vi.send('k1', { type: 'START' });
  t.same(r.state, { on: { light: 'green', counter: 'counting' } });
  t.same(r.tags, ['go']);
  r = vi.send('k1', { type: 'INC', by: 5 });
  t.equal(r.context.count, 5);
  r = vi.send('k1', { type: 'UNKNOWN' });
  t.equal(r.changed, false, 'an event with no transition changes nothing');
  r = vi.send('k1', { type: 'FINISH' });
  t.match(r, { state: 'finished', done: true, context: { count: 5 } });
  t.match(
    JSON.parse(r.snapshot),
    { xstate: 5, state: { status: 'done', output: { total: 5 } } },
    'the machine output is kept in the snapshot',
  );
  t.equal(vi.send('k1', { type: 'START' }).state, 'finished', 'a done actor ignores events');
});

t.test('a context factory computes the context from the input (the given context)', async (t) => {
  const vi = await load(
    importing5(
      `export default createMachine({ id: 'f', initial: 'a', context: ({ input }) => ({ greeting: 'hello ' + input.name, fromInput: input }), states: { a: {} } });`,
    ),
  );
  t.same(vi.start('k', { context: { name: 'ann' } }).context, { greeting: 'hello ann', fromInput: { name: 'ann' } });
});

t.test(
  'after delays and delayed raises are host timers with due times; cancel by id; they survive a restore in a new isolate',
  async (t) => {
    const code = importing5(TIMERS5);
    const vi = await load(code);
    let r = vi.start('k', { context: {} }, { nowMs: 10_000 });
    t.match(r.pendingTimers, [{ kind: 'event', dueAt: 12_000, event: { type: 'xstate.after.2000.timers.waiting' } }]);
    r = vi.send('k', { type: 'ARM' }, 10_100);
    t.match(
      r.pendingTimers.map((x) => x.kind === 'event' && [x.dueAt, x.event.type, x.sendId]),
      [
        [11_600, 'TICK', 'tick'],
        [12_000, 'xstate.after.2000.timers.waiting', 'xstate.after.2000.timers.waiting'],
      ],
    );
    r = vi.advance('k', 11_600);
    t.equal(r.context.ticks, 1, 'the delayed raise fired');
    r = vi.send('k', { type: 'ARM' }, 11_700);
    const armed = r;
    r = vi.send('k', { type: 'DISARM' }, 11_800);
    t.equal(r.pendingTimers.length, 1, 'cancel(id) removed the delayed raise');

    // The committed state as stored, restored in another isolate (a process restart): timers keep their due times.
    const other = await load(code);
    r = other.send('k', { type: 'NOTHING' }, 11_900, restoreOf(armed));
    t.match(
      r.pendingTimers.map((x) => x.kind === 'event' && [x.dueAt, x.event.type]),
      [
        [13_200, 'TICK'],
        [12_000, 'xstate.after.2000.timers.waiting'],
      ].sort((a, b) => Number(a[0]) - Number(b[0])),
    );
    r = other.send('k', { type: 'DISARM' }, 11_950);
    t.equal(r.pendingTimers.length, 1, 'a re-armed delayed raise is still cancelled by its id');
    r = other.advance('k', 11_999);
    t.equal(r.state, 'waiting', 'nothing due yet');
    r = other.advance('k', 12_000);
    t.match(r, { state: 'expired', done: true, pendingTimers: [] });
    t.equal(r.context.ticks, 1);
    t.same(restoredSnapshot(r.snapshot, r.state, r.context).state, {
      status: 'done',
      historyValue: {},
      children: {},
      value: 'expired',
      context: { ticks: 1 },
    });
  },
);

t.test('an invoked promise settles within the step; its failure goes to onError', async (t) => {
  const vi = await load(importing5(SETTLE5));
  vi.start('k', { context: { n: 21 } });
  let r = vi.send('k', { type: 'GO' });
  t.match(r, { state: 'idle', context: { n: 42 }, runningChildren: [] }, 'the promise resolved before the step was collected');
  r = vi.send('k', { type: 'FAIL' });
  t.match(r, { state: 'idle', context: { failure: 'boom' } });
});

t.test('children that do not settle are listed, stopped on request, and their xstate.error.actor event is taken', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await load(importing5(SETTLE5), logs);
  vi.start('k', { context: {} });
  let r = vi.send('k', { type: 'HANG' });
  t.same(r.runningChildren, [{ id: 'hanger', kind: 'actor' }]);
  t.same(vi.stopChildren('k'), [{ id: 'hanger' }]);
  r = vi.send('k', { type: 'xstate.error.actor.hanger', error: { message: 'stopped: no settle' } });
  t.match(r, { state: 'idle', context: { stopped: 'stopped: no settle' }, runningChildren: [] });
  // unhandled, the notice is ignored (xstate 5 would otherwise stop the machine with it)
  r = vi.send('k', { type: 'xstate.error.actor.gone', error: { message: 'x' } });
  t.equal(r.state, 'idle');
  t.match(logs.at(-1), { level: 'error', args: [/xstate.error.actor.gone .* ignored/] });
});

t.test('sendTo a literal persistent ref, sendParent and spawnPersistentInstance become durable effects', async (t) => {
  const vi = await load(
    importing5(`
const ref = { type: 'statebacked.instance', machineName: 'other', machineInstanceName: 'o-1' };
export default createMachine({ id: 'p', initial: 'a', context: {}, states: { a: { on: {
  TELL: { actions: sendTo(ref, ({ event }) => ({ type: 'HELLO', n: event.n })) },
  LATER: { actions: sendTo(ref, { type: 'LATE' }, { delay: 5000, id: 'late' }) },
  NAMED: { actions: sendTo(({ event }) => ({ type: 'statebacked.instance', machineName: 'other', machineInstanceName: event.to }), { type: 'HI' }) },
  UP: { actions: sendParent({ type: 'CHILD_SAYS' }) },
  SPAWN: { actions: assign({ child: () => globalThis.__statebacked_rt.spawn({ machineName: 'kid', machineInstanceName: 'kid-1' }, { name: 'kid', context: { a: 1 } }) }) },
} } } });`),
  );
  vi.start('k', { context: {} }, { nowMs: 1000 });
  let r = vi.send('k', { type: 'TELL', n: 3 }, 1000);
  t.same(r.outboundSends, [
    { to: { type: 'statebacked.instance', machineName: 'other', machineInstanceName: 'o-1' }, event: { type: 'HELLO', n: 3 } },
  ]);
  r = vi.send('k', { type: 'UP' }, 1000);
  t.same(r.outboundSends, [{ to: 'parent', event: { type: 'CHILD_SAYS' } }]);
  r = vi.send('k', { type: 'NAMED', to: 'o-2' }, 1000);
  t.same(r.outboundSends, [
    { to: { type: 'statebacked.instance', machineName: 'other', machineInstanceName: 'o-2' }, event: { type: 'HI' } },
  ]);
  r = vi.send('k', { type: 'SPAWN' }, 1000);
  t.same(r.persistentSpawns, [{ kind: 'spawn', id: 'kid', machineName: 'kid', machineInstanceName: 'kid-1', context: { a: 1 } }]);
  t.same(r.context.child, { type: 'statebacked.instance', id: 'kid', machineName: 'kid', machineInstanceName: 'kid-1' });
  r = vi.send('k', { type: 'LATER' }, 1000);
  t.match(r.pendingTimers, [
    { kind: 'event', dueAt: 6000, sendId: 'late', event: { type: 'LATE' }, to: { machineName: 'other', machineInstanceName: 'o-1' } },
  ]);
  // (a reference whose name is missing says so; the failed call drops the live actor, so this comes last)
  t.throws(() => vi.send('k', { type: 'NAMED' }, 1000), {
    name: 'MachineCodeError',
    message:
      /sendTo: a statebacked.instance reference needs machineName and machineInstanceName as strings; this one has string and undefined/,
  });
  // fired after a restore, the delayed send still goes to the persistent instance
  const other = await load(
    vi === undefined
      ? ''
      : importing5(
          `export default createMachine({ id: 'p', initial: 'a', context: {}, states: { a: { on: { LATER: { actions: sendTo({ type: 'statebacked.instance', machineName: 'other', machineInstanceName: 'o-1' }, { type: 'LATE' }, { delay: 5000, id: 'late' }) } } } } });`,
        ),
  );
  r = other.advance('k', 6000, restoreOf(r));
  t.same(r.outboundSends, [
    { to: { type: 'statebacked.instance', machineName: 'other', machineInstanceName: 'o-1' }, event: { type: 'LATE' } },
  ]);
  t.same(r.pendingTimers, []);
});

t.test('machine code failing stops the step: MachineCodeError, and the actor is rebuilt from its committed state', async (t) => {
  const vi = await load(
    importing5(`export default createMachine({ id: 'e', initial: 'a', context: { n: 0 }, states: { a: { on: {
    INC: { actions: assign({ n: ({ context }) => context.n + 1 }) },
    THROW: { actions: () => { throw new Error('action failed'); } },
  } } } });`),
  );
  const started = vi.start('k', { context: {} });
  t.throws(() => vi.send('k', { type: 'THROW' }), MachineCodeError);
  const r = vi.send('k', { type: 'INC' }, Date.now(), restoreOf(started));
  t.equal(r.context.n, 1);
});

t.test('console output of v5 actions and log() is captured for the instance', async (t) => {
  const logs: CapturedLog[] = [];
  const vi = await load(
    importing5(
      `export default createMachine({ id: 'l', initial: 'a', states: { a: { on: { SAY: { actions: [() => console.warn('warned', { n: 1 }), log('logged')] } } } } });`,
    ),
    logs,
  );
  vi.start('k', { context: {} }, { machineInstanceName: 'inst-1' });
  vi.send('k', { type: 'SAY' });
  t.match(logs, [
    { level: 'warn', args: ['warned', { n: 1 }], instanceKey: 'k', machineInstanceName: 'inst-1' },
    { level: 'log', args: ['logged'], instanceKey: 'k' },
  ]);
});

t.test('a bundle carrying its own xstate 5 copy runs like one importing the shared copy', async (t) => {
  const code = await bundled5(TIMERS5);
  t.notMatch(code, /from\s*["']xstate/, 'nothing imported');
  const vi = await load(code);
  t.equal(vi.info.machine, 'v5');
  let r = vi.start('k', { context: {} }, { nowMs: 0 });
  r = vi.send('k', { type: 'ARM' }, 0);
  t.equal(r.pendingTimers.length, 2);
  const other = await load(code);
  r = other.advance('k', 2000, restoreOf(r));
  t.match(r, { state: 'expired', done: true, context: { ticks: 1 } });
  const settle = await load(await bundled5(SETTLE5));
  settle.start('s', { context: { n: 4 } });
  t.match(settle.send('s', { type: 'GO' }), { state: 'idle', context: { n: 8 } });
});

t.test('one instance cannot reach another instance’s actors', async (t) => {
  const vi = await load(
    importing5(`export default createMachine({ id: 'm', initial: 'a', context: {}, states: { a: { on: {
    POKE: { actions: ({ self }) => {
      const found = [];
      for (let i = 0; i < 50; i++) { const a = self.system.get('x:' + i); if (a) found.push(a); }
      for (const a of found) a.send({ type: 'SET', v: 'written by A' });
      return found.length;
    } },
    SET: { actions: assign({ secret: ({ event }) => event.v }) },
    NOOP: {},
  } } } });`),
  );
  vi.start('org/m/a', { context: { secret: 'A' } });
  vi.start('org/m/b', { context: { secret: 'B' } });
  try {
    vi.send('org/m/a', { type: 'POKE' });
  } catch {
    // what matters is that B is untouched
  }
  t.equal(vi.send('org/m/b', { type: 'NOOP' }).context.secret, 'B');
  await t.rejects(
    VersionIsolate.load({ versionId: 'v', code: importing5(TRAFFIC5).replace("'xstate@5'", "'xstate@5/../../package.json'") }),
    BundleValidationError,
  );
});

t.test('an actor kept by machine code cannot be driven from another instance’s step', async (t) => {
  const vi = await load(
    importing5(`globalThis.__kept = {};
export default createMachine({ id: 'm', initial: 'a', context: {}, states: { a: { on: {
  KEEP: { actions: ({ self, context }) => { globalThis.__kept[context.secret] = self; } },
  SEND: { actions: () => globalThis.__kept.B.send({ type: 'SET', v: 'by A' }) },
  SEND_INTERNAL: { actions: () => globalThis.__kept.B._send({ type: 'SET', v: 'by A' }) },
  SEND_TO: { actions: sendTo(() => globalThis.__kept.B, { type: 'SET', v: 'by A' }) },
  LATER: { actions: () => { Promise.resolve().then(() => globalThis.__kept.B.send({ type: 'SET', v: 'later by A' })); } },
  SET: { actions: assign({ secret: ({ event }) => event.v }) },
  NOOP: {},
} } } });`),
  );
  const startedA = vi.start('org/m/a', { context: { secret: 'A' } });
  vi.start('org/m/b', { context: { secret: 'B' } });
  vi.send('org/m/b', { type: 'KEEP' });
  for (const type of ['SEND', 'SEND_INTERNAL', 'SEND_TO', 'LATER']) {
    t.throws(
      () => vi.send('org/m/a', { type }, Date.now(), restoreOf(startedA)),
      MachineCodeError,
      type + ': the step of A that tried fails',
    );
    t.equal(vi.send('org/m/b', { type: 'NOOP' }).context.secret, 'B', type + ': B is untouched');
  }
  t.equal(vi.send('org/m/b', { type: 'SET', v: 'by B' }).context.secret, 'by B', 'B’s own events still apply');
});

t.test(
  'event types named like Object.prototype members are ordinary events; an http API responseMapper gets the machine output',
  async (t) => {
    const vi = await load(
      importing5(`export default createMachine({ id: 'o', initial: 'a', context: { n: 0 }, output: ({ context, event }) => ({ n: context.n, from: event.output }),
  states: { a: { on: { constructor: { actions: assign({ n: ({ context }) => context.n + 1 }) }, END: 'end' } }, end: { type: 'final', output: ({ context }) => context.n * 10 } } });
export const httpApiMapper = { done: { handler: () => ({ type: 'END' }), responseMapper: ({ result }) => ({ result }) } };`),
    );
    vi.start('k', { context: {} });
    t.equal(vi.send('k', { type: 'toString' }).changed, false, 'no transition: nothing happens');
    t.equal(vi.send('k', { type: 'constructor' }).context.n, 1, 'the declared transition is taken');
    const r = vi.send('k', { type: 'END' });
    t.match(r, { state: 'end', done: true });
    const answered = await vi.httpApiResponse(
      'done',
      { machineInstanceName: 'k', state: r.state, context: r.context, done: r.done, event: { type: 'END' } },
      5000,
    );
    t.same(answered, { kind: 'returned', value: { result: { n: 1, from: 10 } } });
  },
);

t.test('an invoked child machine: its output reaches onDone as xstate.done.actor.<id>; its own delays are not persisted', async (t) => {
  const vi = await load(
    importing5(`
const child = createMachine({ id: 'child', initial: 'busy', context: ({ input }) => ({ n: input.n }), output: ({ context }) => ({ doubled: context.n * 2 }),
  states: { busy: { after: { 300: 'finished' } }, finished: { type: 'final' } } });
export default setup({ actors: { child } }).createMachine({ id: 'parent', initial: 'idle', context: { n: 5 }, states: {
  idle: { on: { RUN: 'running' } },
  running: { invoke: { id: 'kid', src: 'child', input: ({ context }) => ({ n: context.n }),
    onDone: { target: 'idle', actions: assign({ result: ({ event }) => event.output, doneType: ({ event }) => event.type }) } } },
} });`),
  );
  vi.start('k', { context: {} }, { nowMs: 0 });
  let r = vi.send('k', { type: 'RUN' }, 0);
  t.same(r.runningChildren, [{ id: 'kid', kind: 'machine' }]);
  t.match(r.pendingTimers, [{ kind: 'callback', dueAt: 300 }], 'the child’s after delay is its own timer, not a persisted event timer');
  r = vi.advance('k', 300);
  t.match(r, {
    state: 'idle',
    context: { result: { doubled: 10 }, doneType: 'xstate.done.actor.kid' },
    runningChildren: [],
    pendingTimers: [],
  });
});

t.test(
  'persistentInvocableSource as a v5 invoke src: the runtime creates the instance from the input; sendTo by invoke id reaches it, also after a restore',
  async (t) => {
    const code = importing5(`
const persistentInvocableSource = ({ machineName, machineInstanceName }) => ({ type: 'statebacked.invoke', machineName, machineInstanceName });
export default createMachine({ id: 'inv', initial: 'idle', context: { n: 2 }, states: {
  idle: { on: { START: 'working' } },
  working: {
    invoke: { id: 'worker', src: persistentInvocableSource({ machineName: 'child5', machineInstanceName: 'worker-1' }), input: ({ context }) => ({ greeting: 'invoked with ' + context.n }) },
    on: { PING_WORKER: { actions: sendTo('worker', { type: 'PING' }) }, PONG: { actions: assign({ n: ({ context }) => context.n + 1 }) }, STOP: 'idle' },
  },
} });`);
    const vi = await load(code);
    vi.start('k', { context: {} });
    let r = vi.send('k', { type: 'START' });
    t.same(r.persistentSpawns, [
      { kind: 'invoke', id: 'worker', machineName: 'child5', machineInstanceName: 'worker-1', context: { greeting: 'invoked with 2' } },
    ]);
    t.same(r.runningChildren, [], 'a persistent child does not keep the machine from settling');
    r = vi.send('k', { type: 'PING_WORKER' });
    t.same(r.outboundSends, [
      {
        to: { type: 'statebacked.instance', id: 'worker', machineName: 'child5', machineInstanceName: 'worker-1' },
        event: { type: 'PING' },
      },
    ]);
    t.same(vi.stopChildren('k'), [], 'nothing to stop at a settle timeout');
    const other = await load(code);
    r = other.send('k', { type: 'PING_WORKER' }, Date.now(), restoreOf(r));
    t.same(r.persistentSpawns, [], 'restored: not created again');
    t.same(r.outboundSends, [
      {
        to: { type: 'statebacked.instance', id: 'worker', machineName: 'child5', machineInstanceName: 'worker-1' },
        event: { type: 'PING' },
      },
    ]);
    t.equal(other.send('k', { type: 'PONG' }).context.n, 3);
    t.equal(other.send('k', { type: 'STOP' }).state, 'idle');
  },
);
