/**
 * The harness's xstate 5 actors (below: what each gets). Independent of xstate 4: a version runs one
 * major or the other.
 */
import {
  internal,
  I,
  apply,
  arrayPush,
  objectKeys,
  hasOwn,
  $String,
  $Error,
  $WeakMap,
  active,
  errorText,
  jsonCopy,
  isPersistentRef,
  persistentRefProblem,
  refOf,
  machine,
  fail,
  contextOr,
  assignOwn,
} from './harness-base.js';

// ---- XState v5 machines ----
// A v5 machine (the shared copy's, or one of a bundled xstate 5 copy) runs as an Actor of the shared
// v5 copy: its logic (the StateMachine) is driven through the ActorLogic interface, which is what the
// copies have in common, and the Actor, its system and scheduler are the harness's to wrap. Per actor:
// - the clock is the host clock; the system's scheduler is wrapped so that each timer of the root
//   actor knows the delayed event it carries (after, raise and sendTo with a delay), which makes it a
//   persistable event timer, re-armed on restore with its id and due time through the scheduler
//   itself (so cancel(id) still finds it); timers of child actors stay callback timers;
// - the system's _relay is wrapped: an event to a {type:"statebacked.instance"} ref (sendTo a
//   literal persistent ref) or to the root's parent (sendParent; a root actor's parent is a harness
//   sentinel) becomes an outbound durable send reported to the host;
// - a subscription counts changed snapshots and records the first error (the actor stops with it).
// Snapshots leave out the children (ephemeral children do not survive a restore, as with v4) and keep
// status, output and historyValue; the value and context travel beside it (snapshot.ts).
let X5 = null;
export let P5 = null; // Actor methods captured when the copy was bound (before user code could reach them)
let runMachine5 = null;
const PARENT5 = I.objectFreeze({ type: 'statebacked.parent' });
const CROSS_INSTANCE5 =
  'statehold: an event for an actor of another instance was refused: an instance can reach other instances only by durable sends to their statebacked.instance refs';

/** Called once by the v5 entry module with the shared xstate 5 copy. */
export function bindV5(ns) {
  if (X5 !== null) throw new $Error('statehold harness: xstate 5 already bound');
  const ap = ns.Actor.prototype;
  P5 = { send: ap.send, getSnapshot: ap.getSnapshot, start: ap.start, _stop: ap._stop, subscribe: ap.subscribe };
  X5 = { createActor: ns.createActor };
}

/**
 * A v5 StateMachine has __xstatenode too (as v4's StateNode): what tells them apart is v5's actor
 * logic interface (getInitialSnapshot, transition) and its root node.
 */
export function isV5Machine(m) {
  return (
    m !== null &&
    typeof m === 'object' &&
    typeof m.getInitialSnapshot === 'function' &&
    typeof m.transition === 'function' &&
    m.root !== null &&
    typeof m.root === 'object' &&
    m.config !== null &&
    typeof m.config === 'object'
  );
}

/** Resolves what xstate 5 resolves lazily in each state node (its initial state, its transitions), so it fails at upload. */
export function checkV5Node(node, depth) {
  if (depth > 100) return;
  if (node.type === 'compound') void node.initial;
  void node.transitions;
  const children = node.states !== null && typeof node.states === 'object' ? node.states : {};
  const keys = objectKeys(children);
  for (let i = 0; i < keys.length; i++) checkV5Node(children[keys[i]], depth + 1);
}

/**
 * The machine instances run: the bundle's, except that a machine whose context is an object (or
 * none) gets a context factory merging the instance's initial context over it, shallowly, as v4
 * instances get theirs; a machine with a context factory computes its context from the input itself.
 * Built once per version (a StateMachine builds its node tree when constructed).
 */
export function machine5() {
  if (runMachine5 === null) {
    const m = machine();
    persistentInvokes5(m.root, 0);
    const given = m.config.context;
    if (typeof given === 'function') runMachine5 = m;
    else {
      // (as JSON first: a Date, or an object whose toJSON answers something else, is no object there)
      const defaults = contextOr(jsonCopy(given));
      const config = assignOwn({}, m.config);
      config.context = function (args) {
        const input = args.input;
        return assignOwn(assignOwn({}, jsonCopy(defaults)), input !== null && typeof input === 'object' ? input : {});
      };
      runMachine5 = new m.constructor(config, m.implementations);
    }
  }
  return runMachine5;
}

// ---- persistentInvocableSource in v5 invokes ----
// xstate 5 takes only actor logic as an invoke src, and looks it up in the state node's config when
// it starts the invoke: a {type:"statebacked.invoke"} src is replaced there (once per version) by
// logic whose actor stands for the persistent instance. Starting it asks the runtime to create or
// attach the instance (context: the invoke's input); events sent to it by the invoke id go to the
// instance durably; it never finishes, and, like any persistent child, does not keep the machine
// from settling. Its ref is kept in the snapshot (invokes), and a restore brings the actor back
// without asking again.
export const PERSISTENT_INVOKE = new $WeakMap(); // logic -> the statebacked.invoke src it stands for
function persistentInvokes5(node, depth) {
  if (depth > 100 || node === null || typeof node !== 'object') return;
  const config = node.config;
  const list = config && config.invoke;
  const entries = list === undefined || list === null ? [] : I.isArray(list) ? list : [list];
  for (let i = 0; i < entries.length; i++) {
    const src = entries[i] && entries[i].src;
    if (src !== null && typeof src === 'object' && src.type === 'statebacked.invoke' && typeof src.machineName === 'string') {
      entries[i].src = persistentInvokeLogic5(src);
    }
  }
  const children = node.states !== null && typeof node.states === 'object' ? node.states : {};
  const keys = objectKeys(children);
  for (let i = 0; i < keys.length; i++) persistentInvokes5(children[keys[i]], depth + 1);
}
function persistentInvokeLogic5(src) {
  const logic = {
    transition: function (snapshot) {
      return snapshot;
    },
    getInitialSnapshot: function (scope, input) {
      return { status: 'active', output: undefined, error: undefined, input: input };
    },
    start: function (snapshot, scope) {
      if (snapshot.restored === true) return;
      const rec = active;
      if (rec === null) throw new $Error('a persistent invoke started outside any instance');
      const id = $String(scope.self.id);
      const request = {
        kind: 'invoke',
        id: id,
        machineName: src.machineName,
        machineInstanceName: typeof src.machineInstanceName === 'string' ? src.machineInstanceName : internal.randomUUID(),
      };
      if (typeof src.machineVersionId === 'string') request.machineVersionId = src.machineVersionId;
      const input = snapshot.input;
      if (input !== null && typeof input === 'object') request.context = jsonCopy(input);
      arrayPush(rec.spawns, request);
      rec.invokes[id] = {
        type: 'statebacked.instance',
        id: id,
        machineName: request.machineName,
        machineInstanceName: request.machineInstanceName,
      };
      rec.invokeSources[id] = $String(scope.self.src);
    },
    getPersistedSnapshot: function (snapshot) {
      return snapshot;
    },
  };
  I.weakMapSet(PERSISTENT_INVOKE, logic, src);
  return logic;
}
function isPersistentInvoke5(child) {
  try {
    return child !== null && typeof child === 'object' && I.weakMapGet(PERSISTENT_INVOKE, child.logic) !== undefined;
  } catch (_) {
    return false;
  }
}

/** What a timer of the root actor sends to, as a pending timer names it (undefined: the root itself). */
function describeTarget5(rec, target) {
  if (target === rec.actor || target === undefined || target === null) return undefined;
  if (target === PARENT5) return '#_parent';
  if (isPersistentRef(target)) return refOf(target);
  if (typeof target === 'object' && target._parent === rec.actor && typeof target.id === 'string') return target.id;
  return null; // nothing a restored actor could find again
}

export function createActor5(rec, m, options) {
  const key = rec.key;
  options.clock = {
    setTimeout(fn, ms) {
      const meta = rec.pendingMeta,
        rearm = rec.rearm;
      rec.pendingMeta = null;
      rec.rearm = null;
      if (rearm !== null) return internal.rearmTimer(key, fn, rearm.id, rearm.dueAt, meta);
      return internal.addTimer(key, fn, ms, meta);
    },
    clearTimeout(id) {
      internal.clearTimer(id);
    },
  };
  options.devTools = false;
  const actor = X5.createActor(m, options);
  rec.actor = actor;
  const system = actor.system;
  const scheduler = system.scheduler;
  const schedule = scheduler.schedule,
    relay = system._relay;
  scheduler.schedule = function (source, target, event, delay, id) {
    if (id === undefined) id = internal.randomUUID();
    /** @type {{ event: unknown, sendId: string, to?: unknown } | null} */
    let meta = null;
    if (source === actor) {
      const to = describeTarget5(rec, target);
      if (to !== null) {
        meta = { event: jsonCopy(event), sendId: $String(id) };
        if (to !== undefined) meta.to = to;
      }
    }
    rec.pendingMeta = meta;
    try {
      return schedule(source, target, event, delay, id);
    } finally {
      rec.pendingMeta = null;
      rec.rearm = null;
    }
  };
  // Machine code gets its own actor as 'self' and could keep it in a global: an event relayed while
  // another instance's call runs, or from this system to an actor of another one, is refused (the
  // call that tried fails), so no instance is driven outside its own mailbox.
  system._relay = function (source, target, event) {
    if (active !== rec) throw new $Error(CROSS_INSTANCE5);
    const problem = persistentRefProblem(target);
    if (problem !== undefined) throw new $Error('sendTo: ' + problem);
    if (target !== null && typeof target === 'object' && target !== PARENT5 && !isPersistentRef(target) && target.system !== system)
      throw new $Error(CROSS_INSTANCE5);
    if (target === PARENT5) {
      // the root's own completion and failure are the host's business, not events for a parent
      const type = event !== null && typeof event === 'object' ? $String(event.type) : '';
      if (source === actor && (I.stringSlice(type, 0, 18) === 'xstate.done.actor.' || I.stringSlice(type, 0, 19) === 'xstate.error.actor.'))
        return;
      arrayPush(rec.outbound, { to: 'parent', event: jsonCopy(event) });
      return;
    }
    if (isPersistentRef(target)) {
      arrayPush(rec.outbound, { to: refOf(target), event: jsonCopy(event) });
      return;
    }
    if (isPersistentInvoke5(target) && hasOwn(rec.invokes, target.id)) {
      arrayPush(rec.outbound, { to: refOf(rec.invokes[target.id]), event: jsonCopy(event) });
      return;
    }
    return relay(source, target, event);
  };
  actor._parent = PARENT5;
  const ownSend = actor._send;
  actor._send = function (event) {
    if (active !== rec) throw new $Error(CROSS_INSTANCE5);
    return apply(ownSend, actor, [event]);
  };
  apply(P5.subscribe, actor, [
    {
      next: function (snapshot) {
        if (snapshot !== rec.last) {
          rec.last = snapshot;
          rec.transitions++;
          rec.changed = true;
        }
      },
      error: function (e) {
        fail(rec, e);
      },
    },
  ]);
  return actor;
}

/** The failure a v5 actor stopped with, if any (errors inside the machine stop it instead of throwing). */
export function checkFailed5(rec) {
  if (rec.actor === null || rec.failure) return;
  const st = apply(P5.getSnapshot, rec.actor, []);
  if (st !== null && typeof st === 'object' && st.status === 'error') fail(rec, st.error);
}

/** Re-arms a persisted event timer through the scheduler: same id, same due time, cancellable by its send id. */
export function rearm5(rec, timer) {
  const to = timer.to;
  let target = rec.actor;
  if (to === '#_parent') target = PARENT5;
  else if (isPersistentRef(to)) target = refOf(to);
  else if (typeof to === 'string') {
    const children = apply(P5.getSnapshot, rec.actor, []).children;
    target = children && hasOwn(children, to) ? children[to] : undefined;
    if (target === undefined) {
      internal.logError(
        'the delayed event ' +
          $String(timer.event && timer.event.type) +
          ' to child ' +
          to +
          ' was dropped: the child did not survive the restore',
      );
      return;
    }
  }
  rec.rearm = { id: $String(timer.id), dueAt: I.Number(timer.dueAt) };
  try {
    rec.actor.system.scheduler.schedule(
      rec.actor,
      target,
      timer.event,
      0,
      timer.sendId === undefined ? $String(timer.id) : $String(timer.sendId),
    );
  } finally {
    rec.rearm = null;
  }
}

export function sendEvent5(rec, event) {
  const type = event !== null && typeof event === 'object' ? event.type : undefined;
  if (typeof type === 'string' && I.stringSlice(type, 0, 19) === 'xstate.error.actor.' && !handles5(rec, event)) {
    // Unhandled, xstate 5 would stop the machine with the error. The runtime sends one for each child it
    // stopped at the settling timeout; taken that way, it would fail every later event too.
    internal.logError(type + ' (a child stopped because the machine did not settle in time) has no transition in this state: ignored');
    return;
  }
  apply(P5.send, rec.actor, [event]);
  checkFailed5(rec);
}

function handles5(rec, event) {
  try {
    return machine5().getTransitionData(apply(P5.getSnapshot, rec.actor, []), event).length > 0;
  } catch (_) {
    return true;
  }
}

function childrenOf5(rec) {
  const st = apply(P5.getSnapshot, rec.actor, []);
  return st !== null && typeof st === 'object' && st.children !== null && typeof st.children === 'object' ? st.children : {};
}
function isActiveChild5(child) {
  try {
    return child !== null && typeof child === 'object' && apply(P5.getSnapshot, child, []).status === 'active';
  } catch (_) {
    return false;
  }
}

export function runningChildren5(rec) {
  const list = [];
  const children = childrenOf5(rec);
  const ids = objectKeys(children);
  for (let i = 0; i < ids.length; i++) {
    const child = children[ids[i]];
    if (!isActiveChild5(child) || isPersistentInvoke5(child)) continue;
    const logic = child.logic;
    arrayPush(list, {
      id: $String(ids[i]),
      kind:
        logic !== null && typeof logic === 'object' && logic.root && typeof logic.getInitialSnapshot === 'function' ? 'machine' : 'actor',
    });
  }
  return list;
}

/** Stops the running children, forgets them in the machine's snapshot, and answers their ids. */
export function stopChildren5(rec) {
  const ids = [];
  const st = apply(P5.getSnapshot, rec.actor, []);
  const children = childrenOf5(rec);
  const keys = objectKeys(children);
  const kept = {};
  for (let i = 0; i < keys.length; i++) {
    const child = children[keys[i]];
    if (!isActiveChild5(child) || isPersistentInvoke5(child)) {
      kept[keys[i]] = child;
      continue;
    }
    arrayPush(ids, $String(keys[i]));
    try {
      apply(P5._stop, child, []);
    } catch (e) {
      internal.logError('stopping child ' + $String(keys[i]) + ' threw: ' + errorText(e));
    }
  }
  if (st !== null && typeof st === 'object') st.children = kept;
  return ids;
}

/**
 * The order xstate 5 holds the active state nodes in (`_nodes`: the order they were entered, live), when
 * more than one is atomic (regions of a parallel state); null otherwise. xstate picks between eventless
 * transitions of several regions in that order, and its own restore rebuilds them level by level: two
 * such transitions enabled at once could then resolve otherwise than live (xstate alone: n 41 live, 12
 * restored, the differential test's seed 20261130). Persisted beside the snapshot, and put back on a
 * restore (restoreNodeOrder5), a restored instance picks as a live one does.
 */
function nodeOrder5(st) {
  const nodes = st !== null && typeof st === 'object' ? st._nodes : undefined;
  if (!I.isArray(nodes)) return null;
  let atomic = 0;
  for (let i = 0; i < nodes.length; i++) if (nodes[i].type === 'atomic' || nodes[i].type === 'final') atomic++;
  if (atomic < 2) return null;
  const ids = [];
  for (let i = 0; i < nodes.length; i++) arrayPush(ids, $String(nodes[i].id));
  return ids;
}

/** Puts a restored snapshot's active state nodes back in the order `order` names (nodeOrder5); the ones it does not name last, as they were. */
export function restoreNodeOrder5(st, order) {
  if (!I.isArray(order) || st === null || typeof st !== 'object' || !I.isArray(st._nodes)) return;
  const rank = { __proto__: null };
  for (let i = 0; i < order.length; i++) rank[$String(order[i])] = i;
  const nodes = st._nodes;
  const ranked = I.arrayMap(nodes, function (node, index) {
    return { node: node, at: hasOwn(rank, node.id) ? rank[node.id] : order.length + index };
  });
  I.arraySort(ranked, function (a, b) {
    return a.at - b.at;
  });
  st._nodes = I.arrayMap(ranked, function (entry) {
    return entry.node;
  });
}

/** The snapshot of a v5 actor to persist: what restoreSnapshot needs besides the value and context. */
export function snapshotOf5(st, rec) {
  const history = {};
  const hv = st.historyValue;
  if (hv !== null && typeof hv === 'object') {
    const keys = objectKeys(hv);
    for (let i = 0; i < keys.length; i++) {
      const list = hv[keys[i]];
      if (!I.isArray(list)) continue;
      const ids = [];
      for (let j = 0; j < list.length; j++) arrayPush(ids, { id: $String(list[j].id) });
      history[keys[i]] = ids;
    }
  }
  const state = { status: st.status, historyValue: history, children: {}, __fromHead: { value: true, context: true } };
  if (st.output !== undefined) state.output = st.output;
  const snapshot = { xstate: 5, state: state };
  const order = nodeOrder5(st);
  if (order !== null) snapshot.nodeOrder = order;
  if (objectKeys(rec.invokes).length > 0) {
    snapshot.invokes = rec.invokes;
    snapshot.invokeSources = rec.invokeSources;
  }
  return snapshot;
}

/** What a v5 machine outputs in the top-level final state given (root output, from that state's output). */
export function outputOf5(input) {
  const m = machine5();
  const value = input.state;
  const root = m.root;
  if (!input.done || typeof value !== 'string' || !root.states || !hasOwn(root.states, value) || root.output === undefined) return null;
  const node = root.states[value];
  if (!node || node.type !== 'final') return null;
  const resolve = function (mapper, event) {
    return typeof mapper === 'function' ? mapper({ context: input.context, event: event, self: undefined }) : mapper;
  };
  const doneState = {
    type: 'xstate.done.state.' + $String(node.id),
    output: node.output !== undefined ? resolve(node.output, input.event) : undefined,
  };
  const out = resolve(root.output, doneState);
  return out === undefined ? null : jsonCopy(out);
}
