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

t.test("a migration's paths never reach Object.prototype: __proto__, constructor and prototype are names like any other", async (t) => {
  const before = Object.getOwnPropertyNames(Object.prototype).length;
  const value = valueOfPaths([
    ['__proto__', 'pwned', 'yes'],
    ['constructor', 'prototype', 'isAdmin', 'true'],
    ['toString', 'x'],
  ]) as Record<string, unknown>;
  t.equal(({} as Record<string, unknown>).pwned, undefined, 'no object gained pwned');
  t.equal(({} as Record<string, unknown>).isAdmin, undefined, 'nor isAdmin');
  t.equal(Object.getOwnPropertyNames(Object.prototype).length, before);
  t.equal(Object.getPrototypeOf(value), Object.prototype, "the value's prototype is untouched");
  t.same(Object.keys(value), ['__proto__', 'constructor', 'toString'], 'each is an own member of the value');
  t.same(
    JSON.parse(JSON.stringify(value)),
    JSON.parse('{"__proto__":{"pwned":"yes"},"constructor":{"prototype":{"isAdmin":"true"}},"toString":"x"}'),
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
