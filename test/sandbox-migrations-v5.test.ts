/**
 * The sandbox's half of upgrades that involve XState v5 (docs/migrations.md): the paths a v5
 * instance's history states remember, and the start of an upgraded instance on a v5 version (its
 * history rebuilt from mapped paths, its pending `after` events renamed across majors), driven as
 * the runtime drives it, version isolate by version isolate.
 */
import t, { type Test } from 'tap';
import { runMigration } from '../src/sandbox/bundle-validation.js';
import { restoredSnapshot } from '../src/sandbox/snapshot.js';
import { VersionIsolate } from '../src/sandbox/version-isolate.js';
import type { StepResult } from '../src/sandbox/types.js';
import { leafPaths, rememberedPaths, upgradedSnapshot, valueOfPaths } from '../src/runtime/upgrade-state.js';
import { importing5, invokingParent5 } from './fixtures/xstate-v5/machines.js';

const ALLOW = `export const allowRead = () => true;
export const allowWrite = () => true;`;
// v1 in both majors: a player, on/off, where "on" remembers (shallow history) playing or paused.
const V1_BODY = `{ id: 'player', initial: 'on', context: { volume: 3 },
  states: {
    on: { initial: 'playing', states: { playing: { on: { PAUSE: 'paused' } }, paused: { on: { PLAY: 'playing' } }, hist: { type: 'history' } }, on: { OFF: 'off' } },
    off: { on: { ON: 'on.hist' } },
  } }`;
const V1_4 = `import { createMachine } from 'xstate';
export default createMachine({ predictableActionArguments: true, ...${V1_BODY} });
${ALLOW}`;
const V1_5 = importing5(`export default createMachine(${V1_BODY});`);
// v2 (v5): renamed, "held" now has an inner state a deep history goes back to, and "standby" wakes by itself after a minute.
const V2_5 = importing5(`export default createMachine({ id: 'player', initial: 'powered', context: { level: 0 },
  states: {
    powered: { initial: 'running', on: { OFF: 'standby' }, states: {
      running: { on: { PAUSE: 'held' } },
      held: { initial: 'short', states: { short: { on: { LONGER: 'long' } }, long: {} }, on: { PLAY: 'running' } },
      hist: { type: 'history', history: 'deep' },
    } },
    standby: { after: { 60000: 'powered' }, on: { ON: 'powered.hist' } },
  } });`);
const MIGRATION = `const names = { on: 'powered', playing: 'running', paused: 'held', off: 'standby' };
export const upgradeState = (path) => path.map((name) => names[name] ?? name);
export const upgradeContext = (oldPaths, newPaths, context) => ({ level: context.volume * 10 });`;

const load = async (t: Test, versionId: string, code: string): Promise<VersionIsolate> => {
  const vi = await VersionIsolate.load({ versionId, code });
  t.teardown(() => vi.dispose());
  return vi;
};

/** What the runtime's upgradeIfDue does between the old version's last step and the new version's start. */
const upgrade = async (from: VersionIsolate, before: StepResult, migration: string) => {
  const old = restoredSnapshot(before.snapshot, before.state, before.context);
  const remembered = old.xstate === 5 ? from.rememberedPaths5(old) : rememberedPaths(old.state.historyValue);
  const migrated = await runMigration(migration, { paths: leafPaths(before.state), remembered, context: before.context });
  return { remembered, snapshot: upgradedSnapshot(old, valueOfPaths(migrated.paths), migrated.context, migrated.remembered) };
};

t.test("a v5 instance's history is read as paths by its own machine", async (t) => {
  const v1 = await load(t, 'ver_v1', V1_5);
  v1.start('k', { context: {} });
  v1.send('k', { type: 'PAUSE' });
  const off = v1.send('k', { type: 'OFF' });
  t.same(v1.rememberedPaths5(restoredSnapshot(off.snapshot, off.state, off.context)), [['on', 'paused']]);
  t.same(
    v1.rememberedPaths5({ xstate: 5, state: { historyValue: { 'player.on.hist': [{ id: 'player.gone' }, { id: 'player.on' }] } } }),
    [['on']],
    'ids the machine does not have are skipped',
  );
});

for (const [major, code] of [
  ['v5', V1_5],
  ['v4', V1_4],
] as const) {
  t.test(`${major} → v5: the upgraded instance goes back where ${major} had been, by its v5 name, and keeps its delay`, async (t) => {
    const v1 = await load(t, 'ver_v1', code);
    const now = Date.now();
    v1.start('k', { context: {} }, { nowMs: now });
    v1.send('k', { type: 'PAUSE' }, now);
    const off = v1.send('k', { type: 'OFF' }, now);
    t.equal(off.state, 'off');
    const { remembered, snapshot } = await upgrade(v1, off, MIGRATION);
    t.same(remembered, [['on', 'paused']]);

    const v2 = await load(t, 'ver_v2', V2_5);
    // the delay v2's standby would have armed on entry, carried as the old major named it
    const afterType = major === 'v5' ? 'xstate.after.60000.player.standby' : 'xstate.after(60000)#player.standby';
    const pendingTimers = [{ kind: 'event' as const, id: 'timer-1', dueAt: now + 60_000, event: { type: afterType }, sendId: afterType }];
    const started = v2.start('k', { snapshot, pendingTimers }, { nowMs: now });
    t.equal(started.state, 'standby');
    t.same(started.context, { level: 30 });
    t.match(
      started.pendingTimers,
      [{ kind: 'event', id: 'timer-1', dueAt: now + 60_000, event: { type: 'xstate.after.60000.player.standby' } }],
      "the delay is kept, in v5's name",
    );
    t.match(JSON.parse(started.snapshot), {
      xstate: 5,
      state: { status: 'active', historyValue: { 'player.powered.hist': [{ id: 'player.powered.held' }] } },
    });

    t.same(v2.advance('k', now + 60_000).state, { powered: 'running' }, 'the carried delay fires the v5 after transition');

    v2.start('k', { snapshot, pendingTimers }, { nowMs: now });
    const back = v2.send('k', { type: 'ON' }, now);
    t.same(back.state, { powered: { held: 'short' } }, 'a deep history that remembers a compound state enters its initial state');
    v2.send('k', { type: 'LONGER' }, now);
    v2.send('k', { type: 'OFF' }, now);
    t.same(v2.send('k', { type: 'ON' }, now).state, { powered: { held: 'long' } }, 'and from then on remembers as xstate does');
  });
}

t.test('v5 → v4: history and a pending delay carry over to an xstate 4 machine', async (t) => {
  const v1 = await load(t, 'ver_v1', V1_5);
  v1.start('k', { context: {} });
  v1.send('k', { type: 'PAUSE' });
  const off = v1.send('k', { type: 'OFF' });
  const { snapshot } = await upgrade(v1, off, MIGRATION);
  const v2 = await load(
    t,
    'ver_v2',
    `import { createMachine } from 'xstate';
export default createMachine({ id: 'player', predictableActionArguments: true, initial: 'powered', context: { level: 0 },
  states: {
    powered: { initial: 'running', states: { running: { on: { PAUSE: 'held' } }, held: { on: { PLAY: 'running' } }, hist: { type: 'history' } }, on: { OFF: 'standby' } },
    standby: { after: { 60000: 'powered' }, on: { ON: 'powered.hist' } },
  } });
${ALLOW}`,
  );
  const now = Date.now();
  const type = 'xstate.after.60000.player.standby';
  const started = v2.start(
    'k',
    { snapshot, pendingTimers: [{ kind: 'event', id: 'timer-1', dueAt: now + 60_000, event: { type }, sendId: type }] },
    { nowMs: now },
  );
  t.equal(started.state, 'standby');
  t.match(started.pendingTimers, [{ id: 'timer-1', event: { type: 'xstate.after(60000)#player.standby' } }]);
  t.same(v2.advance('k', now + 60_000).state, { powered: 'running' }, 'the carried delay fires the v4 after transition');
  v2.start('k', { snapshot, pendingTimers: [] }, { nowMs: now });
  t.same(v2.send('k', { type: 'ON' }, now).state, { powered: 'held' }, 'the history state goes back to what v5 remembered');
});

t.test('v5: deep and parallel history rebuilt from paths, keeping only what can be one state', async (t) => {
  const code = importing5(`export default createMachine({ id: 'm', initial: 'a',
  states: {
    a: { type: 'parallel', on: { OUT: 'z' }, states: {
      x: { initial: 'x1', states: { x1: { on: { X: 'x2' } }, x2: {} } },
      y: { initial: 'y1', states: { y1: { on: { Y: 'y2' } }, y2: {} } },
    } },
    b: { initial: 'b1', states: { b1: {}, b2: {}, h: { type: 'history' } } },
    deep: { type: 'history', history: 'deep' },
    z: { on: { BACK: 'deep', B: 'b.h' } },
  } });`);
  const vi = await load(t, 'ver_p', code);
  const snapshot = {
    xstate: 5 as const,
    // remembered: both regions of a (they fit beside each other), b2 then b1 (one compound: the first is kept)
    state: {
      value: 'z',
      context: {},
      __upgradeHistory: [
        ['a', 'x', 'x2'],
        ['a', 'y', 'y2'],
        ['b', 'b2'],
        ['b', 'b1'],
      ],
    },
  };
  const started = vi.start('k', { snapshot });
  t.match(JSON.parse(started.snapshot).state.historyValue, {
    'm.deep': [{ id: 'm.a.x.x2' }, { id: 'm.a.y.y2' }],
    'm.b.h': [{ id: 'm.b.b2' }],
  });
  t.same(vi.send('k', { type: 'BACK' }).state, { a: { x: 'x2', y: 'y2' } });
  vi.start('k', {
    snapshot: {
      ...snapshot,
      state: {
        ...snapshot.state,
        __upgradeHistory: [
          ['b', 'b2'],
          ['b', 'b1'],
        ],
      },
    },
  });
  t.same(vi.send('k', { type: 'B' }).state, { b: 'b2' });
});

t.test('an upgraded v5 snapshot naming no state of the new machine fails its start, saying which', async (t) => {
  const vi = await load(t, 'ver_v2', V2_5);
  t.throws(() => vi.start('k', { snapshot: { xstate: 4, state: { value: { nowhere: 'at-all' }, context: {}, __upgradeHistory: [] } } }), {
    name: 'MachineCodeError',
    message: /nowhere/,
  });
  t.throws(
    () => vi.start('k', { snapshot: { xstate: 4, state: { value: 'standby', context: {}, __upgradeHistory: [['powered', 'gone']] } } }),
    {
      name: 'MachineCodeError',
      message: /history state remembers to \["powered","gone"\], which names no state of this version/,
    },
  );
  t.throws(
    () => vi.start('k', { snapshot: { xstate: 4, state: { value: 'standby', context: {}, __upgradeHistory: [['powered', 'hist']] } } }),
    /names no state/,
    'a history pseudo-state is no state to go back to',
  );
  // (looked up in plain objects, these found Object.prototype's members: xstate 5 then started in the initial state)
  for (const value of ['__proto__', 'constructor', 'toString', { powered: 'hasOwnProperty' }]) {
    t.throws(
      () => vi.start('k', { snapshot: { xstate: 4, state: { value, context: {}, __upgradeHistory: [] } } }),
      { name: 'MachineCodeError', message: /which names no state of this version/ },
      JSON.stringify(value),
    );
  }
});

t.test('v5 → v5: a persistent invoke is kept where the new version has one at the same place, else dropped', async (t) => {
  const v1 = await load(t, 'ver_inv1', invokingParent5);
  const started = v1.start('k', { context: {} });
  t.match(started.persistentSpawns, [{ kind: 'invoke', id: 'worker', machineName: 'child5', machineInstanceName: 'worker-1' }]);
  const old = restoredSnapshot(started.snapshot, started.state, started.context);
  const same = upgradedSnapshot(old, 'working', { pongs: 1 }, []);

  const kept = await load(t, 'ver_inv2', invokingParent5);
  kept.start('k', { snapshot: same });
  t.match(
    kept.send('k', { type: 'PING_WORKER' }).outboundSends,
    [{ to: { type: 'statebacked.instance', machineName: 'child5', machineInstanceName: 'worker-1' }, event: { type: 'PING' } }],
    'sendTo by invoke id still reaches the instance',
  );

  const logs: string[] = [];
  const moved = await VersionIsolate.load({
    versionId: 'ver_inv3',
    code: invokingParent5.replace("initial: 'working'", "initial: 'busy'").replace('  working: {', '  busy: {'),
    onLog: (entry) => logs.push(JSON.stringify(entry.args)),
  });
  t.teardown(() => moved.dispose());
  const upgraded = moved.start('k', { snapshot: upgradedSnapshot(old, 'busy', { pongs: 1 }, []) });
  t.equal(upgraded.state, 'busy', 'the upgrade does not fail on an invoke the new machine has elsewhere');
  t.notOk(JSON.parse(upgraded.snapshot).invokes?.worker, 'that invoke is not carried over');
  t.match(logs.join('\n'), /persistent invoke worker was not carried over/);
});

t.test('an upgrade that maps to a top-level final state of a v5 machine leaves it done, with its output', async (t) => {
  const vi = await load(
    t,
    'ver_final',
    importing5(`export default createMachine({ id: 'f', initial: 'open', context: { n: 0 },
  output: ({ context, event }) => ({ n: context.n, via: event.output }),
  states: { open: { on: { CLOSE: 'closed' } }, closed: { type: 'final', output: ({ event }) => event.type } } });`),
  );
  const started = vi.start('k', { snapshot: { xstate: 4, state: { value: 'closed', context: { n: 2 }, __upgradeHistory: [] } } });
  t.equal(started.done, true);
  t.match(JSON.parse(started.snapshot).state, { status: 'done', output: { n: 2, via: 'statebacked.upgrade' } });
  t.equal(vi.start('k', { snapshot: { xstate: 4, state: { value: 'open', context: {}, __upgradeHistory: [] } } }).done, false);
});
