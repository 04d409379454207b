/**
 * The pure half of an instance upgrade (wire-protocol §8.5): the state paths a migration is given,
 * and the state its answers make. A state value, in both xstate majors, is a name or an object of
 * regions. The history of a v4 instance is a tree, `{ current, states }` per compound state, read
 * here; a v5 instance's names state nodes by id, which only its machine resolves (the harness's
 * rememberedPaths5).
 */
import type { JsonObject, PersistedSnapshot, StateValue } from '../domain/machine-state.js';

type StatePath = string[];

/** The leaf paths of a state value: `{a: {b: 'x', c: 'y'}}` → `[['a','b','x'], ['a','c','y']]`. */
export const leafPaths = (value: StateValue, prefix: StatePath = []): StatePath[] => {
  if (typeof value === 'string') return [[...prefix, value]];
  const keys = Object.keys(value);
  if (keys.length === 0) return prefix.length > 0 ? [prefix] : [];
  return keys.flatMap((key) => leafPaths(value[key] as StateValue, [...prefix, key]));
};

interface HistoryNode {
  current?: StateValue;
  states?: Record<string, HistoryNode | undefined>;
}

/**
 * The paths a v4 instance's history states remember: for every compound state below the root, the
 * leaf paths of the value it had when last left, from the root. (The root's is the current state.)
 */
export const rememberedPaths = (historyValue: unknown): StatePath[] => {
  const found = new Map<string, StatePath>();
  const walk = (node: HistoryNode | undefined, path: StatePath): void => {
    if (!node || typeof node !== 'object') return;
    if (path.length > 0 && node.current !== undefined && node.current !== null) {
      for (const leaf of leafPaths(node.current, path)) found.set(JSON.stringify(leaf), leaf);
    }
    for (const [key, child] of Object.entries(node.states ?? {})) walk(child, [...path, key]);
  };
  walk(historyValue as HistoryNode, []);
  return [...found.values()];
};

/** Thrown when a migration's paths do not make a state (one path ends where another goes on). */
export class InvalidUpgradePathError extends Error {
  override name = 'InvalidUpgradePathError';
}

/**
 * A member of a state value under construction: its own ones only, and set as own data properties.
 * The names come from a migration's upgradeState, so `__proto__` or `constructor` must neither find
 * nor set Object.prototype's members (a plain assignment to `__proto__` would set the prototype, and
 * one through `constructor.prototype` would change every object of the node's process).
 */
const ownMember = (node: Record<string, unknown>, key: string): unknown => (Object.hasOwn(node, key) ? node[key] : undefined);
const setMember = (node: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(node, key, { value, enumerable: true, writable: true, configurable: true });
};

/** The state value of leaf paths: the inverse of `leafPaths`. */
export const valueOfPaths = (paths: StatePath[]): StateValue => {
  if (paths.length === 0) throw new InvalidUpgradePathError('upgradeState gave no state path');
  if (paths.length === 1 && paths[0]!.length === 1) return paths[0]![0]!;
  const root: Record<string, unknown> = {};
  for (const path of paths) {
    if (path.length < 2)
      throw new InvalidUpgradePathError(
        `state path ${JSON.stringify(path)} cannot stand beside ${JSON.stringify(paths.filter((p) => p !== path)[0])}: a top-level state has no parallel siblings`,
      );
    let node = root;
    for (let i = 0; i < path.length - 2; i++) {
      const key = path[i]!;
      const next = ownMember(node, key);
      if (typeof next === 'string')
        throw new InvalidUpgradePathError(
          `state paths disagree at ${JSON.stringify(path.slice(0, i + 1))}: one ends there, another goes on`,
        );
      if (next === undefined) {
        const child: Record<string, unknown> = {};
        setMember(node, key, child);
        node = child;
      } else node = next as Record<string, unknown>;
    }
    const parent = path[path.length - 2]!;
    const leaf = path[path.length - 1]!;
    const existing = ownMember(node, parent);
    if (existing === undefined) setMember(node, parent, leaf);
    else if (existing !== leaf) {
      throw new InvalidUpgradePathError(
        `state paths disagree at ${JSON.stringify(path.slice(0, -1))}: ${JSON.stringify(existing)} or ${JSON.stringify(leaf)}`,
      );
    }
  }
  return root as StateValue;
};

/**
 * The snapshot an upgraded instance restarts from on its new version: the old one with the new value
 * and context, no running activities, and its history left for the new machine to rebuild from the
 * remembered paths (the harness reads `__upgradeHistory`: it needs the new machine's states, and its
 * xstate major, which may differ from the old one's: `xstate` still names the old one's).
 */
export const upgradedSnapshot = (
  old: PersistedSnapshot,
  value: StateValue,
  context: JsonObject,
  remembered: StatePath[],
): PersistedSnapshot => {
  const { historyValue: _history, done: _done, __fromHead: _marker, ...rest } = old.state;
  return {
    ...old,
    state: { ...rest, value, context, activities: {}, __upgradeHistory: remembered },
  };
};
