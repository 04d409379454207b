/**
 * The harness's part of an instance upgrade (wire-protocol §7.5, §8.5; docs/migrations.md). Three
 * jobs, in the order an upgrade needs them:
 * - `rememberedPaths5`, on the old version: a v5 snapshot names the states its history states
 *   remember by state node id, which only that version's machine can turn into paths;
 * - `migrate`, in a migration's own isolate: the bundle's upgradeState and upgradeContext;
 * - on the new version, the start from the snapshot the host made (upgrade-state.ts upgradedSnapshot,
 *   marked `__upgradeHistory`): the history rebuilt in this machine's xstate major from the mapped
 *   remembered paths, and pending `after` events renamed to that major's form.
 * Either major may be on either side: only the value, context, remembered paths and timers cross.
 */
import { updateHistoryValue as X_updateHistoryValue } from 'xstate/lib/utils';
import {
  internal,
  I,
  arrayPush,
  objectKeys,
  hasOwn,
  mapGet,
  mapSet,
  jsonStringify,
  jsonParse,
  $Error,
  $String,
  getPrototypeOf,
  enterCall,
  jsonCopy,
  assignOwn,
  bundle,
  v5,
} from './harness-base.js';
import { X_toSCXMLEvent } from './harness-v4.js';
import { machine5, outputOf5, PERSISTENT_INVOKE } from './harness-v5.js';

// ---- upgrades ----
// A new object each time: machine code sees it (state.event) and could change it.
function upgradeEvent() {
  return { type: 'statebacked.upgrade' };
}

const PLAIN_OBJECT_PROTOTYPE = getPrototypeOf({});

/** An array of state names; `__proto__` names no state (an object key of that name sets the prototype). */
function isPath(p) {
  if (!I.isArray(p) || p.length === 0) return false;
  for (let i = 0; i < p.length; i++) if (typeof p[i] !== 'string' || p[i] === '__proto__') return false;
  return true;
}

/**
 * A migration bundle's work (wire-protocol §7.5): upgradeState for every current leaf path and every
 * path a history state remembers, then upgradeContext with the old and new leaf paths. Each function
 * gets JSON copies; what they return must be paths (arrays of state names) and an object.
 */
/** @param {string} inputJson @returns {string} (a call from the host: version-isolate.ts) */
export function migrate(inputJson) {
  enterCall();
  const input = jsonParse(inputJson);
  const upgradeState = bundle.upgradeState,
    upgradeContext = bundle.upgradeContext;
  const mapAll = function (paths, what) {
    const out = [];
    for (let i = 0; i < paths.length; i++) {
      const mapped = upgradeState(jsonCopy(paths[i]), jsonCopy(input.context));
      if (!isPath(mapped)) {
        throw new $Error(
          'upgradeState returned ' +
            $String(jsonStringify(mapped)) +
            ' for the ' +
            what +
            ' ' +
            jsonStringify(paths[i]) +
            ': it must return a non-empty array of state names',
        );
      }
      arrayPush(out, jsonCopy(mapped));
    }
    return out;
  };
  const paths = mapAll(input.paths, 'state path');
  const remembered = mapAll(input.remembered, 'history path');
  const upgraded = upgradeContext(jsonCopy(input.paths), jsonCopy(paths), jsonCopy(input.context));
  // Checked before the JSON copy, which would turn a Promise (an async upgradeContext), a Map or a Set into {}.
  const proto = upgraded !== null && typeof upgraded === 'object' ? getPrototypeOf(upgraded) : undefined;
  if (proto !== PLAIN_OBJECT_PROTOTYPE && proto !== null) {
    const what =
      proto !== undefined && typeof upgraded.then === 'function'
        ? 'a Promise (migrations run synchronously: no async upgradeContext)'
        : $String(jsonStringify(upgraded));
    throw new $Error('upgradeContext returned ' + what + ': it must return the new context, a plain object');
  }
  const context = jsonCopy(upgraded);
  // (a toJSON may still make it something else)
  if (context === null || typeof context !== 'object' || I.isArray(context)) {
    throw new $Error('upgradeContext returned ' + $String(jsonStringify(context)) + ': it must return the new context, a plain object');
  }
  return jsonStringify({ paths: paths, remembered: remembered, context: context });
}

/**
 * The paths a v5 instance's history states remember, from its persisted snapshot: each history state
 * keeps a list of state nodes (the atomic ones below its parent for a deep history, the parent's
 * child for a shallow one), persisted as their ids. Ids this machine does not have are skipped.
 */
/** @param {string} snapshotJson @returns {string} (a call from the host: version-isolate.ts) */
export function rememberedPaths5(snapshotJson) {
  enterCall();
  if (!v5) throw new $Error('rememberedPaths5 is for XState v5 machines');
  const m = machine5();
  const history = jsonParse(snapshotJson).state.historyValue;
  const found = [],
    seen = new I.Map();
  const keys = history !== null && typeof history === 'object' ? objectKeys(history) : [];
  for (let i = 0; i < keys.length; i++) {
    const list = history[keys[i]];
    if (!I.isArray(list)) continue;
    for (let j = 0; j < list.length; j++) {
      let node;
      try {
        node = m.getStateNodeById($String(list[j] && list[j].id));
      } catch (_) {
        continue;
      }
      const path = I.arraySlice(node.path);
      const text = jsonStringify(path);
      if (mapGet(seen, text) === undefined) {
        mapSet(seen, text, true);
        arrayPush(found, path);
      }
    }
  }
  return jsonStringify(found);
}

/** The state node a remembered path names in this version (root: the v4 machine or v5 machine.root). */
function rememberedNodeAt(root, path) {
  let node = root;
  for (let i = 0; i < path.length; i++) {
    const states = node.states;
    const next = states !== null && typeof states === 'object' && hasOwn(states, path[i]) ? states[path[i]] : undefined;
    if (next === undefined || next === null || next.type === 'history') {
      throw new $Error(
        'upgradeState mapped a path a history state remembers to ' + jsonStringify(path) + ', which names no state of this version',
      );
    }
    node = next;
  }
  return node;
}

/**
 * Refuses a state value naming a state this version does not have as its own: xstate looks children
 * up in plain objects, where `__proto__`, `constructor` or `toString` find Object.prototype's members
 * (xstate 4 then committed an instance no event could move; xstate 5 put it in its initial state).
 */
function checkOwnStates(node, value, depth) {
  if (depth > 100) return;
  const states = node.states;
  const has = (key) => states !== null && typeof states === 'object' && hasOwn(states, key);
  const refuse = (key) => {
    throw new $Error('upgradeState mapped the instance to ' + jsonStringify(key) + ', which names no state of this version');
  };
  if (typeof value === 'string') {
    if (!has(value)) refuse(value);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const keys = objectKeys(value);
  for (let i = 0; i < keys.length; i++) {
    if (!has(keys[i])) refuse(keys[i]);
    checkOwnStates(states[keys[i]], value[keys[i]], depth + 1);
  }
}

function valueOfPath(path) {
  let value = path[path.length - 1];
  for (let i = path.length - 2; i >= 0; i--) {
    const v = {};
    v[path[i]] = value;
    value = v;
  }
  return value;
}

/**
 * A v4 upgraded instance's history: this machine's own history tree (every compound state at its
 * initial value), then each remembered path's value, then the current value, folded in as
 * transitions do.
 */
function upgradedHistory4(base, remembered, value) {
  for (let i = 0; i < remembered.length; i++) rememberedNodeAt(base, remembered[i]);
  let hist = base.historyValue();
  if (hist === undefined) return undefined;
  for (let i = 0; i < remembered.length; i++) hist = X_updateHistoryValue(hist, valueOfPath(remembered[i]));
  return X_updateHistoryValue(hist, value);
}

/**
 * The v4 State config an upgraded instance starts from. From a v4 instance it is the old State JSON
 * with the new value and context; a v5 instance's snapshot has nothing else an xstate 4 State needs,
 * so it gets an _event of its own (the upgrade).
 */
export function upgradedState4(base, snapshot) {
  const s = snapshot.state;
  const remembered = s.__upgradeHistory;
  delete s.__upgradeHistory;
  const state =
    snapshot.xstate === 5
      ? { value: s.value, context: s.context, _event: X_toSCXMLEvent(upgradeEvent()), actions: [], children: {}, activities: {} }
      : s;
  checkOwnStates(base, state.value, 0);
  state.historyValue = upgradedHistory4(base, remembered, state.value);
  return state;
}

/**
 * The persisted v5 snapshot an upgraded instance starts from: the new value (resolveState refuses a
 * value naming no state of this machine) and context, the history rebuilt from the remembered paths,
 * no children. A value in a top-level final state makes it done, with the machine's output.
 */
export function upgradedState5(m, s) {
  checkOwnStates(m.root, s.value, 0);
  const resolved = m.resolveState({ value: s.value, context: s.context });
  const state = {
    status: resolved.status === 'done' ? 'done' : 'active',
    value: s.value,
    context: s.context,
    historyValue: upgradedHistory5(m, s.__upgradeHistory),
    children: {},
  };
  if (state.status === 'done') {
    const output = outputOf5({ state: s.value, context: s.context, done: true, event: upgradeEvent() });
    if (output !== null) state.output = output;
  }
  return state;
}

/**
 * The persistent invokes (persistentInvocableSource) an upgraded v5 instance keeps. The restore
 * brings each back by its xstate source name, which is its place in the old machine
 * ("xstate.invoke.INDEX.STATE.ID"), and fails on a place the new machine does not have: those whose
 * place holds no persistent invoke in this version are dropped, and the drop is logged. (From a v4
 * instance there are no source names: its persistent invokes are not carried over.)
 */
export function keepPersistentInvokes5(m, snapshot) {
  const invokes = snapshot.invokes,
    sources = snapshot.invokeSources;
  if (invokes === null || typeof invokes !== 'object') return;
  const keptInvokes = {},
    keptSources = {};
  const ids = objectKeys(invokes);
  for (let i = 0; i < ids.length; i++) {
    const src = sources !== null && typeof sources === 'object' && hasOwn(sources, ids[i]) ? sources[ids[i]] : undefined;
    if (persistentInvokeAt5(m, src)) {
      keptInvokes[ids[i]] = invokes[ids[i]];
      keptSources[ids[i]] = src;
      continue;
    }
    internal.logError(
      'the persistent invoke ' +
        $String(ids[i]) +
        ' was not carried over by the upgrade: this version has no persistent invoke where it was (' +
        $String(src) +
        ')',
    );
  }
  snapshot.invokes = keptInvokes;
  snapshot.invokeSources = keptSources;
}

function persistentInvokeAt5(m, src) {
  if (typeof src !== 'string' || I.stringSlice(src, 0, 14) !== 'xstate.invoke.') return false;
  let dot = 14;
  while (dot < src.length && src[dot] !== '.') dot++;
  try {
    const list = m.getStateNodeById(I.stringSlice(src, dot + 1)).config.invoke;
    const entry = I.isArray(list) ? list[I.Number(I.stringSlice(src, 14, dot))] : list;
    return entry !== undefined && entry !== null && I.weakMapGet(PERSISTENT_INVOKE, entry.src) !== undefined;
  } catch (_) {
    return false;
  }
}

/**
 * xstate 5 keeps, per history state id, the state nodes it goes back to. For each history state of
 * this machine: the remembered nodes strictly below its parent (a deep history takes the node the
 * path names, a shallow one the parent's child on the path), in the order remembered, leaving out
 * any that cannot be in one state with those already taken (two children of a compound state, or a
 * node and its ancestor). Persisted form ({ id }), which the restore resolves.
 */
function upgradedHistory5(m, remembered) {
  const nodes = [];
  for (let i = 0; i < remembered.length; i++) arrayPush(nodes, rememberedNodeAt(m.root, remembered[i]));
  const history = {};
  const visit = function (parent, depth) {
    if (depth > 100) return;
    const children = parent.states !== null && typeof parent.states === 'object' ? parent.states : {};
    const keys = objectKeys(children);
    for (let i = 0; i < keys.length; i++) {
      const child = children[keys[i]];
      if (child.type !== 'history') {
        visit(child, depth + 1);
        continue;
      }
      const taken = [];
      for (let j = 0; j < nodes.length; j++) {
        const entry = historyEntry5(parent, nodes[j], child.history === 'deep');
        if (entry !== null && fitsBeside5(taken, entry)) arrayPush(taken, entry);
      }
      if (taken.length > 0)
        history[child.id] = I.arrayMap(taken, function (n) {
          return { id: $String(n.id) };
        });
    }
  };
  visit(m.root, 0);
  return history;
}

/** What a history state of 'parent' keeps of a remembered node: null when the node is not below it. */
function historyEntry5(parent, node, deep) {
  let below = null,
    at = node;
  while (at !== undefined && at !== null && at !== parent) {
    below = at;
    at = at.parent;
  }
  if (at !== parent || below === null) return null;
  return deep ? node : below;
}

function fitsBeside5(taken, node) {
  for (let i = 0; i < taken.length; i++) {
    const ancestors = new I.Map();
    for (let a = taken[i]; a !== undefined && a !== null; a = a.parent) mapSet(ancestors, a, true);
    if (mapGet(ancestors, node) !== undefined) return false;
    let common = node;
    while (common !== undefined && common !== null && mapGet(ancestors, common) === undefined) common = common.parent;
    if (common === taken[i] || common === null || common === undefined || common.type !== 'parallel') return false;
  }
  return true;
}

/**
 * Pending timers for a machine of xstate 'major': an 'after' event of the other major is renamed
 * (v4 "xstate.after(DELAY)#STATE.ID", v5 "xstate.after.DELAY.STATE.ID"), so a delay carried across
 * an upgrade between majors still fires the transition of the state with that id.
 */
export function timersForMajor(major, timers) {
  if (!I.isArray(timers)) return timers;
  const out = [];
  for (let i = 0; i < timers.length; i++) {
    const t = timers[i];
    const type = t && t.kind === 'event' && t.event && typeof t.event.type === 'string' ? t.event.type : undefined;
    const renamed = type === undefined ? undefined : afterEventOf(major, type);
    if (renamed === undefined) {
      arrayPush(out, t);
      continue;
    }
    const copy = assignOwn({}, t);
    copy.event = assignOwn(assignOwn({}, t.event), { type: renamed });
    if (t.sendId === type) copy.sendId = renamed;
    arrayPush(out, copy);
  }
  return out;
}

/** The after event type of the other major in major's form; undefined when it is none. */
function afterEventOf(major, type) {
  if (major === 5 && I.stringSlice(type, 0, 13) === 'xstate.after(') {
    for (let i = 13; i < type.length - 2; i++) {
      if (type[i] === ')' && type[i + 1] === '#') return 'xstate.after.' + I.stringSlice(type, 13, i) + '.' + I.stringSlice(type, i + 2);
    }
  }
  if (major === 4 && I.stringSlice(type, 0, 13) === 'xstate.after.') {
    for (let i = 13; i < type.length - 1; i++) {
      if (type[i] === '.') return 'xstate.after(' + I.stringSlice(type, 13, i) + ')#' + I.stringSlice(type, i + 1);
    }
  }
  return undefined;
}
