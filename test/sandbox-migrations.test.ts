import t from 'tap';
import { runMigration, validateMigrationBundle } from '../src/sandbox/bundle-validation.js';
import { restoredSnapshot } from '../src/sandbox/snapshot.js';
import { VersionIsolate } from '../src/sandbox/version-isolate.js';
import { leafPaths, rememberedPaths, upgradedSnapshot } from '../src/runtime/upgrade-state.js';

// v1: a player, on/off, where "on" remembers (history) whether it was playing or paused.
const V1 = `import { createMachine } from 'xstate';
export default createMachine({ id: 'player', predictableActionArguments: true, initial: 'on', context: { volume: 3 },
  states: {
    on: { initial: 'playing', states: { playing: { on: { PAUSE: 'paused' } }, paused: { on: { PLAY: 'playing' } }, hist: { type: 'history' } }, on: { OFF: 'off' } },
    off: { on: { ON: 'on.hist' } },
  } });
export const allowRead = () => true;
export const allowWrite = () => true;`;
// v2: the same with new names: powered.{running,held}, standby; the context's volume is now a level.
const V2 = `import { createMachine } from 'xstate';
export default createMachine({ id: 'player', predictableActionArguments: true, initial: 'powered', context: { level: 0 },
  states: {
    powered: { initial: 'running', states: { running: { on: { PAUSE: 'held' } }, held: { on: { PLAY: 'running' } }, hist: { type: 'history' } }, on: { OFF: 'standby' } },
    standby: { on: { ON: 'powered.hist' } },
  } });
export const allowRead = () => true;
export const allowWrite = () => true;`;
const MIGRATION = `const names = { on: 'powered', playing: 'running', paused: 'held', off: 'standby' };
export const upgradeState = (path, context) => path.map((name) => names[name] ?? name);
export const upgradeContext = (oldPaths, newPaths, context) => ({ level: context.volume * 10, seen: newPaths });`;

t.test('a migration bundle must export both functions', async (t) => {
  t.same(await validateMigrationBundle(MIGRATION), { ok: true });
  t.match(await validateMigrationBundle('export const upgradeState = (p) => p;'), { ok: false, error: /upgradeContext/ });
  t.match(await validateMigrationBundle('export const upgradeContext = (a, b, c) => c;'), { ok: false, error: /upgradeState/ });
  t.match(await validateMigrationBundle('export const upgradeState = ;'), { ok: false, error: /SyntaxError/ });
});

t.test('migrate maps current and remembered paths and the context', async (t) => {
  const out = await runMigration(MIGRATION, { paths: [['off']], remembered: [['on', 'paused']], context: { volume: 3 } });
  t.same(out, { paths: [['standby']], remembered: [['powered', 'held']], context: { level: 30, seen: [['standby']] } });
});

t.test('a migration that throws or answers nonsense fails with what it did', async (t) => {
  await t.rejects(
    runMigration('export const upgradeState = () => { throw new Error("nope"); }; export const upgradeContext = (a, b, c) => c;', {
      paths: [['a']],
      remembered: [],
      context: {},
    }),
    /nope/,
  );
  await t.rejects(
    runMigration('export const upgradeState = () => "a"; export const upgradeContext = (a, b, c) => c;', {
      paths: [['a']],
      remembered: [],
      context: {},
    }),
    /upgradeState returned "a" for the state path \["a"\]/,
  );
  await t.rejects(
    runMigration('export const upgradeState = () => ["__proto__", "polluted"]; export const upgradeContext = (a, b, c) => c;', {
      paths: [['a']],
      remembered: [],
      context: {},
    }),
    /upgradeState returned \["__proto__","polluted"\] for the state path \["a"\]/,
    '__proto__ names no state',
  );
  await t.rejects(
    runMigration('export const upgradeState = (p) => p; export const upgradeContext = () => 7;', {
      paths: [['a']],
      remembered: [],
      context: {},
    }),
    /upgradeContext returned 7/,
  );
  // A JSON copy would make each of these {}: the context would be lost without a word.
  for (const [body, said] of [
    ['async (a, b, c) => c', /returned a Promise/],
    ['(a, b, c) => Promise.resolve(c)', /returned a Promise/],
    ['() => new Map([["k", 1]])', /returned \{\}: it must return the new context, a plain object/],
    ['() => [1]', /returned \[1\]/],
    ['() => ({ toJSON: () => null })', /returned null: it must return the new context, a plain object/],
  ] as const) {
    await t.rejects(
      runMigration(`export const upgradeState = (p) => p; export const upgradeContext = ${body};`, {
        paths: [['a']],
        remembered: [],
        context: { kept: 1 },
      }),
      said,
      body,
    );
  }
  t.same(
    (
      await runMigration(
        'export const upgradeState = (p) => p; export const upgradeContext = (a, b, c) => Object.assign(Object.create(null), c);',
        { paths: [['a']], remembered: [], context: { kept: 1 } },
      )
    ).context,
    { kept: 1 },
    'a null-prototype object is a plain one',
  );
});

t.test('an instance upgraded from v1 to v2 keeps what its history state remembers', async (t) => {
  const v1 = await VersionIsolate.load({ versionId: 'ver_v1', code: V1 });
  t.teardown(() => v1.dispose());
  v1.start('k', { context: {} });
  v1.send('k', { type: 'PAUSE' });
  const before = v1.send('k', { type: 'OFF' });
  t.equal(before.state, 'off');
  const old = restoredSnapshot(before.snapshot, before.state, before.context);
  const remembered = rememberedPaths(old.state.historyValue);
  t.same(remembered, [['on', 'paused']], 'v1 remembers it was paused');

  const migrated = await runMigration(MIGRATION, { paths: leafPaths(before.state), remembered, context: before.context });
  const v2 = await VersionIsolate.load({ versionId: 'ver_v2', code: V2 });
  t.teardown(() => v2.dispose());
  const started = v2.start('k', { snapshot: upgradedSnapshot(old, 'standby', migrated.context, migrated.remembered) });
  t.equal(started.state, 'standby');
  t.same(started.context, { level: 30, seen: [['standby']] });
  const back = v2.send('k', { type: 'ON' });
  t.same(back.state, { powered: 'held' }, 'the history state goes back to what v1 remembered, by its v2 name');
});

t.test('a remembered path the new version does not have fails the upgraded start, saying which', async (t) => {
  const v2 = await VersionIsolate.load({ versionId: 'ver_v2', code: V2 });
  t.teardown(() => v2.dispose());
  const snapshot = (remembered: string[][]) => ({
    xstate: 4 as const,
    state: {
      value: 'standby',
      context: {},
      _event: { name: 'xstate.init', data: { type: 'xstate.init' }, $$type: 'scxml', type: 'external' },
      __upgradeHistory: remembered,
    },
  });
  t.throws(() => v2.start('k', { snapshot: snapshot([['powered', 'gone']]) }), {
    name: 'MachineCodeError',
    message: /\["powered","gone"\], which names no state of this version/,
  });
  t.equal(v2.start('k', { snapshot: snapshot([['powered', 'held']]) }).state, 'standby', 'one it has is taken');
});

t.test('an upgraded state named like a member of every object (__proto__, constructor, …) fails the start', async (t) => {
  const v2 = await VersionIsolate.load({ versionId: 'ver_v2', code: V2 });
  t.teardown(() => v2.dispose());
  const snapshot = (value: unknown) => ({
    xstate: 4 as const,
    state: {
      value,
      context: {},
      _event: { name: 'xstate.init', data: { type: 'xstate.init' }, $$type: 'scxml', type: 'external' },
      __upgradeHistory: [],
    },
  });
  for (const value of ['__proto__', 'constructor', 'toString', { powered: 'hasOwnProperty' }, { valueOf: 'x' }]) {
    t.throws(
      () => v2.start('k', { snapshot: snapshot(value) }),
      { name: 'MachineCodeError', message: /which names no state of this version/ },
      JSON.stringify(value),
    );
  }
  t.same(v2.start('k', { snapshot: snapshot({ powered: 'held' }) }).state, { powered: 'held' }, 'a state it has is taken');
});
