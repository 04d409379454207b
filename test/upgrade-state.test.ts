import t from 'tap';
import { leafPaths, rememberedPaths, upgradedSnapshot, valueOfPaths } from '../src/runtime/upgrade-state.js';

t.test('leaf paths and back', async (t) => {
  t.same(leafPaths('idle'), [['idle']]);
  t.same(leafPaths({ a: { b: 'x', c: { d: 'y' } } }), [
    ['a', 'b', 'x'],
    ['a', 'c', 'd', 'y'],
  ]);
  for (const value of ['idle', { a: 'b' }, { a: { b: 'x', c: { d: 'y' } } }])
    t.same(valueOfPaths(leafPaths(value)), value, JSON.stringify(value));
});

t.test('paths that make no state are refused, saying where', async (t) => {
  t.throws(() => valueOfPaths([]), { name: 'InvalidUpgradePathError', message: /no state path/ });
  t.throws(() => valueOfPaths([['a'], ['b']]), /top-level state has no parallel siblings/);
  t.throws(
    () =>
      valueOfPaths([
        ['a', 'x'],
        ['a', 'y'],
      ]),
    /disagree at \["a"\]/,
  );
  t.throws(
    () =>
      valueOfPaths([
        ['a', 'b'],
        ['a', 'b', 'c'],
      ]),
    /one ends there, another goes on/,
  );
});

t.test('the paths history states remember, below the root', async (t) => {
  const history = {
    current: { on: 'playing' },
    states: {
      on: { current: { playing: 'fast' }, states: { playing: { current: 'fast', states: {} }, paused: undefined } },
      off: { current: 'asleep', states: {} },
    },
  };
  t.same(rememberedPaths(history), [
    ['on', 'playing', 'fast'],
    ['off', 'asleep'],
  ]);
  t.same(rememberedPaths(undefined), []);
});

t.test('an upgraded snapshot carries the new value and context and the remembered paths for the harness', async (t) => {
  const old = {
    xstate: 4 as const,
    state: {
      _event: { name: 'GO' },
      historyValue: { current: 'a' },
      done: false,
      activities: { tick: true },
      value: 'a',
      context: { n: 1 },
    },
  };
  const upgraded = upgradedSnapshot(old, { b: 'c' }, { m: 2 }, [['b', 'd']]);
  t.same(upgraded.state, { _event: { name: 'GO' }, value: { b: 'c' }, context: { m: 2 }, activities: {}, __upgradeHistory: [['b', 'd']] });
});
