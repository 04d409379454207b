/**
 * Pure steps (below): xstate 4 actors that rest without an interpreter between steps.
 */
import * as X from 'xstate';
import { provide } from 'xstate/lib/serviceScope';
import {
  internal,
  I,
  apply,
  mapGet,
  mapSet,
  arrayPush,
  objectKeys,
  hasOwn,
  $Error,
  jsonStringify,
  jsonParse,
  getPrototypeOf,
  $WeakMap,
  v5,
  machine,
  assignOwn,
} from './harness-base.js';
import { P, X_toSCXMLEvent, LOGGER, freeSessionsOf, createInterpreter, deferToSelf, restingDelayed } from './harness-v4.js';

// ---- pure steps: actors that rest without an interpreter ----
// An interpreter costs ≈ 5.5 KB of the isolate per instance and most of them only wait for their next
// event. When nothing in the machine can leave anything running but delayed events to itself (no
// invoke, activity or send to another actor; only assign, log, raise, choose among such, 'after',
// sends to itself with a fixed delay (a number, or the name of one in the delays option), cancel, and
// custom action functions), an actor between steps is only its State and its pending delayed events:
// an event is taken by the machine's own pure transition, and the actions the interpreter would run
// (custom functions, log, the delayed send and its cancel) are run as its _exec does, at the same
// moments (during the transition with predictableActionArguments, after it otherwise), with the same
// arguments; a delayed event's timer delivers it to the resting actor as the interpreter's own would
// (deferToSelf). A spawn() inside an assign (the one way such a machine starts something) wakes an
// interpreter from the state the step began in, at that moment, which spawns the child and takes the
// step's result as its own send would have; the actor keeps it until nothing runs any more.
let pureSteps = true; // configure() may switch them off (--pure-steps off)
let pureVerdict; // undefined until the bundle's machine was examined
const NEEDS_INTERPRETER = new $Error('statehold: spawn needs an interpreter');
let pureCall = null; // { rec, before } while a pure step runs; before is null while a new actor starts
let spawnAttempted = false;
export const spawnGuard = {
  spawn: function (entity, name, options) {
    const call = pureCall;
    if (call === null || call.before === null) {
      spawnAttempted = true;
      throw NEEDS_INTERPRETER;
    }
    const rec = call.rec;
    if (rec.interp === null) {
      wake(rec, call.before);
      // inside the step, as inside its send: events the interpreter gets meanwhile wait for the step's end
      rec.interp.scheduler.processingEvent = true;
    }
    return rec.interp.spawn(entity, name, options);
  },
};

export function pureMachine() {
  if (!pureSteps || v5) return false;
  if (pureVerdict === undefined) {
    try {
      pureVerdict = restsWithoutInterpreter(machine());
    } catch (_) {
      pureVerdict = false;
    }
  }
  return pureVerdict;
}
function restsWithoutInterpreter(m) {
  if (m === null || typeof m !== 'object' || m.__xstatenode !== true) return false;
  // (what Interpreter#start does first: each state's 'after' becomes entry sends and exit cancels; a
  // bundled copy of xstate 4 too old to have it keeps interpreters for machines with 'after')
  const initialized = typeof m._init === 'function';
  if (initialized) m._init();
  const implementations = m.options && m.options.actions ? m.options.actions : {};
  const delays = m.options && m.options.delays ? m.options.delays : {};
  // A delay by name resolves to what the machine's delays option holds: a number stays that number;
  // a function may return anything (what is not a number makes the interpreter send at once).
  const fixedDelay = function (delay) {
    return typeof delay === 'number' || (typeof delay === 'string' && hasOwn(delays, delay) && typeof delays[delay] === 'number');
  };
  // What xstate makes of an action at run time (toActionObject): a name or type with an
  // implementation that is itself an action object (a send, say) becomes that object.
  const pureAction = function (a, depth) {
    if (depth > 20) return false;
    if (typeof a === 'function') return true;
    const type = typeof a === 'string' ? a : a !== null && typeof a === 'object' ? a.type : undefined;
    if (typeof type !== 'string') return false;
    const impl = implementations[type];
    if (impl !== undefined && impl !== null && typeof impl === 'object') return pureAction(impl, depth + 1);
    if (typeof a === 'string' || typeof impl === 'function') return true;
    if (type === 'xstate.assign' || type === 'xstate.log') return true;
    if (type === 'xstate.raise') return a.delay === undefined;
    // a delayed event to itself ('after' makes these); with no delay, or to another actor, it needs the interpreter
    if (type === 'xstate.send') return fixedDelay(a.delay) && a.to === undefined;
    if (type === 'xstate.cancel') return true;
    if (type === 'xstate.choose') {
      const conds = a.conds;
      if (!I.isArray(conds)) return false;
      for (let i = 0; i < conds.length; i++) {
        const list = conds[i] && conds[i].actions;
        const actions = I.isArray(list) ? list : list === undefined ? [] : [list];
        for (let j = 0; j < actions.length; j++) if (!pureAction(actions[j], depth + 1)) return false;
      }
      return true;
    }
    if (I.stringSlice(type, 0, 7) === 'xstate.') return false; // send, cancel, start, stop, pure, ...
    return typeof a.exec === 'function' || a.exec === undefined;
  };
  const allPure = function (list) {
    if (!I.isArray(list)) return false;
    for (let i = 0; i < list.length; i++) if (!pureAction(list[i], 0)) return false;
    return true;
  };
  const visit = function (node) {
    if (node.invoke.length > 0 || node.activities.length > 0 || (!initialized && node.config.after !== undefined)) return false;
    if (!allPure(node.onEntry) || !allPure(node.onExit)) return false;
    const transitions = node.transitions;
    for (let i = 0; i < transitions.length; i++) if (!allPure(transitions[i].actions)) return false;
    const children = node.states || {};
    const keys = objectKeys(children);
    for (let i = 0; i < keys.length; i++) if (!visit(children[keys[i]])) return false;
    return true;
  };
  return visit(m);
}

/**
 * What Interpreter#_exec does with the actions a pure machine can have (custom functions, log, a
 * delayed send to itself and cancel), for a resting actor (rec).
 */
function runAction(rec, m, action, context, _event, state) {
  // as _exec does (getActionFunction reads the map as it is)
  const impl = action.exec || (m.options.actions ? m.options.actions[action.type] : undefined);
  const exec = typeof impl === 'function' ? impl : impl ? impl.exec : action.exec;
  if (exec) {
    exec(
      context,
      _event.data,
      m.config.predictableActionArguments ? { action: action, _event: _event } : { action: action, state: state, _event: _event },
    );
    return;
  }
  if (action.type === 'xstate.send') {
    // (the verdict let in only sends to itself whose delay is a number or names one: resolveSend made it that number)
    if (typeof action.delay !== 'number' || action.to) throw new $Error('statehold: a pure step met a send it cannot take');
    // a spawn may have woken an interpreter within the step: then the timer id goes in its map
    deferToSelf(rec, action, rec.interp !== null ? rec.interp.delayedEventsMap : restingDelayed(rec));
    return;
  }
  if (action.type === 'xstate.cancel') {
    const map = rec.interp !== null ? rec.interp.delayedEventsMap : restingDelayed(rec);
    internal.clearTimer(map[action.sendId]);
    delete map[action.sendId];
    return;
  }
  if (action.type === 'xstate.log') {
    if (action.label) LOGGER(action.label, action.value);
    else LOGGER(action.value);
  }
}

/** The interpreter's send, for a resting actor. */
export function pureSend(rec, event) {
  const m = machine();
  const current = asOwnState(m, rec.state);
  // an interpreter that reached a final state has stopped and ignores events
  if (current.done) return;
  const _event = X_toSCXMLEvent(event);
  const predictable = !!m.config.predictableActionArguments;
  const exec = predictable
    ? function (action, context, ev) {
        runAction(rec, m, action, context, ev, undefined);
      }
    : undefined;
  let next;
  pureCall = { rec: rec, before: current };
  try {
    next = provide(spawnGuard, function () {
      return m.transition(current, _event, undefined, exec);
    });
    if (rec.interp !== null) {
      // a spawn woke an interpreter: it takes the step's state as its send would have
      apply(P.update, rec.interp, [next, _event]);
    }
  } catch (e) {
    if (rec.interp !== null) {
      rec.interp.scheduler.clear();
      rec.interp.scheduler.processingEvent = false;
    }
    throw e;
  } finally {
    pureCall = null;
  }
  if (rec.interp !== null) {
    rec.interp.scheduler.processingEvent = false;
    rec.interp.scheduler.flushEvents();
    return;
  }
  rec.state = next;
  next.history = undefined; // the state before (xstate keeps one level of it); not delete, which would slow the object down
  if (next.changed !== false) {
    rec.transitions++;
    rec.changed = true;
  }
  if (!predictable) for (let i = 0; i < next.actions.length; i++) runAction(rec, m, next.actions[i], next.context, next._event, next);
  if (next.done) cancelAllDelayed(rec);
}

/** What the interpreter's _stop does to delayed events once the machine is done: all are cancelled. */
function cancelAllDelayed(rec) {
  const map = rec.delayed;
  if (map === null) return;
  rec.delayed = null;
  const ids = objectKeys(map);
  for (let i = 0; i < ids.length; i++) internal.clearTimer(map[ids[i]]);
}

/**
 * The interpreter's start for a new instance, for a pure machine; false when the initial state spawns
 * (then nothing ran: the initial state's actions run after it is computed, and the interpreter path
 * computes it again).
 */
export function pureStart(rec, m, context) {
  const spawnsBefore = rec.spawns.length;
  spawnAttempted = false;
  pureCall = { rec: rec, before: null };
  let initial;
  try {
    initial = provide(spawnGuard, function () {
      return m.getInitialState(m.initialStateValue, context);
    });
  } catch (e) {
    if (!spawnAttempted) throw e;
  } finally {
    pureCall = null;
  }
  if (spawnAttempted) {
    rec.spawns.length = spawnsBefore;
    return false;
  }
  rec.state = initial;
  rec.transitions = 1;
  rec.changed = true;
  // as Interpreter#start runs the initial state's actions: with that state's context
  for (let i = 0; i < initial.actions.length; i++) runAction(rec, m, initial.actions[i], initial.context, initial._event, initial);
  if (initial.done) cancelAllDelayed(rec);
  return true;
}

// A bundle that carries its own xstate 4 has its own State class, and that copy's
// StateNode#transition tells a State from a state value by instanceof: a State of another copy (the
// shared one's) is read as a state value, which throws "Child state 'actions' does not exist" or, for
// a parallel root, resolves to the initial configuration. So every State the harness hands a machine
// is made by that machine's own copy: through its resolveState, or with the State class its
// resolveState was seen to make (ownStates).
const X_State = X.State,
  X_StateNode = X.StateNode;
// What a restore of a resting actor costs is mostly xstate's resolveState (≈ 30 µs here for a small
// machine, more than its transition): it makes a State from the snapshot, walks the machine for the
// configuration of the state value, and makes a second State from the first one's fields. What it
// derives from the value (the full value, the configuration, done, tags) depends on the value alone,
// so it is kept per machine and value, and a later restore of the same value makes the one State
// those fields give: what resolveState's second State is given, field for field.
const ownStates = new $WeakMap(); // machine -> { State: its copy's State class, values: Map(value as JSON -> its resolution) }
const MAX_RESOLVED_VALUES = 1000; // per machine; values past it resolve each time
function ownStatesOf(m) {
  let own = I.weakMapGet(ownStates, m);
  if (own === undefined) {
    own = { State: null, values: new I.Map() };
    I.weakMapSet(ownStates, m, own);
  }
  return own;
}
/** m.resolveState, noting the State class m's copy makes; the value keeps s.value's order (keepValueOrder). */
function resolveOwn(m, s) {
  const state = m.resolveState(s);
  const own = ownStatesOf(m);
  if (own.State === null) own.State = getPrototypeOf(state).constructor;
  keepValueOrder(state.value, s.value);
  return state;
}
// xstate 4 takes a parallel state's regions in the order of its state value's keys: the regions'
// transitions on one event, their actions, which of two conflicting ones wins. Live, that is the
// order the regions were last entered in; its resolveState (a restore, Interpreter#start from a State)
// rebuilds the value in document order. So a restored value's keys are put back in the order of the
// value it was restored from, and a restored instance answers as the live one did.
/** Reorders, in place, the keys of value's objects (parallel states) as they are in `like`; keys `like` lacks stay last. */
export function keepValueOrder(value, like) {
  if (value === null || typeof value !== 'object' || like === null || typeof like !== 'object') return;
  const keys = objectKeys(value);
  if (keys.length > 1) {
    const order = objectKeys(like);
    let same = true;
    for (let i = 0, j = 0; i < order.length && j < keys.length; i++) {
      if (!hasOwn(value, order[i])) continue;
      if (order[i] !== keys[j++]) {
        same = false;
        break;
      }
    }
    if (!same) {
      const entries = [];
      for (let i = 0; i < order.length; i++) if (hasOwn(value, order[i])) arrayPush(entries, order[i], value[order[i]]);
      for (let i = 0; i < keys.length; i++) if (!hasOwn(like, keys[i])) arrayPush(entries, keys[i], value[keys[i]]);
      for (let i = 0; i < keys.length; i++) delete value[keys[i]];
      for (let i = 0; i < entries.length; i += 2) value[entries[i]] = entries[i + 1];
    }
  }
  const all = objectKeys(value);
  for (let i = 0; i < all.length; i++) if (hasOwn(like, all[i])) keepValueOrder(value[all[i]], like[all[i]]);
}
/** state as a State of m's own xstate copy (a State of another copy, or a plain config, is resolved by m). */
function asOwnState(m, state) {
  const own = I.weakMapGet(ownStates, m);
  if (own !== undefined && own.State !== null) return state instanceof own.State ? state : resolveOwn(m, state);
  // not yet seen: only a State of the shared copy given to a machine of another copy needs it
  return state instanceof X_State && !(m instanceof X_StateNode) ? resolveOwn(m, state) : state;
}
export function restingState(m, s) {
  if (
    s === null ||
    typeof s !== 'object' ||
    s._event === null ||
    typeof s._event !== 'object' ||
    s.activities === null ||
    typeof s.activities !== 'object' ||
    !I.isArray(s.actions) ||
    !I.isArray(s.events)
  ) {
    return resolveOwn(m, s); // (what the snapshots the harness writes always have; anything else the long way)
  }
  const own = ownStatesOf(m);
  const byValue = own.values;
  const valueJson = jsonStringify(s.value);
  const known = mapGet(byValue, valueJson);
  if (known === undefined || own.State === null) {
    const state = resolveOwn(m, s);
    if (I.mapSize(byValue) < MAX_RESOLVED_VALUES) {
      const tags = [];
      I.setForEach(state.tags, function (tag) {
        arrayPush(tags, tag);
      });
      mapSet(byValue, valueJson, {
        valueJson: jsonStringify(state.value),
        configuration: I.arraySlice(state.configuration),
        done: state.done,
        tags: tags,
      });
    }
    return state;
  }
  return new own.State({
    value: jsonParse(known.valueJson),
    context: s.context,
    _event: s._event,
    _sessionid: s._sessionid,
    historyValue: s.historyValue,
    history: s.history,
    actions: s.actions,
    activities: s.activities,
    events: s.events,
    transitions: s.transitions,
    children: s.children,
    configuration: I.arraySlice(known.configuration),
    done: known.done,
    tags: I.arraySlice(known.tags),
    machine: m.machine,
  });
}

/** Gives a resting actor an interpreter, started from its State (nothing re-runs). */
function wake(rec, state) {
  state.actions = [];
  state.children = {};
  delete state.history;
  delete state._sessionid;
  rec.state = null;
  rec.interp = createInterpreter(rec, machine());
  if (rec.delayed !== null) {
    assignOwn(rec.interp.delayedEventsMap, rec.delayed);
    rec.delayed = null;
  }
  apply(P.start, rec.interp, [state]);
  keepValueOrder(rec.interp.state.value, state.value);
  rec.transitions = 0;
  rec.changed = false;
}

/** After a step: an interpreter of a pure machine with nothing running any more is let go. */
export function restIfIdle(rec, pendingTimers) {
  if (rec.actor !== null || rec.interp === null || !pureMachine() || rec.interp.children.size !== 0) return;
  for (let i = 0; i < pendingTimers.length; i++) if (pendingTimers[i].kind === 'event' && pendingTimers[i].to !== undefined) return;
  const st = apply(P.state, rec.interp, []);
  // its delayed events to itself stay pending (their timers deliver to the resting actor): _stop
  // would cancel what its map holds
  const delayed = rec.interp.delayedEventsMap;
  rec.interp.delayedEventsMap = {};
  try {
    apply(P._stop, rec.interp, []);
  } catch (_) {
    rec.interp.delayedEventsMap = delayed;
    return;
  }
  rec.delayed = objectKeys(delayed).length > 0 ? delayed : null;
  freeSessionsOf(rec.key);
  rec.interp = null;
  rec.kinds = null;
  st.history = undefined;
  rec.state = st;
}

/** Switches pure steps off (configure: --pure-steps off). */
export function disablePureSteps() {
  pureSteps = false;
}
/** Forgets the pure step under way (recover: a call cut short by the CPU-time limit). */
export function forgetPureCall() {
  pureCall = null;
}
