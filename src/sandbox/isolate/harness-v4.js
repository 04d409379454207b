/**
 * The harness's xstate 4 interpreters (harness.js says what each gets): the shared copy's
 * Interpreter methods captured before user code runs, event lookups without Object.prototype in the
 * way, xstate's session registry scoped to the actor a call runs for, and the interpreter an actor
 * gets, with its delayed events, re-armed timers and persisted snapshot.
 */
import * as X from 'xstate';
import { registry } from 'xstate/lib/registry';
import {
  internal,
  I,
  apply,
  mapGet,
  mapSet,
  mapDelete,
  mapForEach,
  arrayPush,
  objectKeys,
  hasOwn,
  $String,
  getPrototypeOf,
  objectDefineProperty,
  $WeakMap,
  active,
  jsonCopy,
  isPersistentRef,
  persistentRefProblem,
  refOf,
  fail,
  $Error,
} from './harness-base.js';
import { pureSend } from './harness-pure-steps.js';

const proto = X.Interpreter.prototype;

export const P = {
  defer: proto.defer,
  _stop: proto._stop,
  start: proto.start,
  onTransition: proto.onTransition,
  removeChild: proto.removeChild,
  update: proto.update,
  state: I.getOwnPropertyDescriptor(proto, 'state').get,
};
const X_interpret = X.interpret;
export const X_spawn = X.spawn,
  X_toSCXMLEvent = X.toSCXMLEvent;
export const LOGGER = X.Interpreter.defaultOptions.logger;
const ActionTypes_Start = X.ActionTypes.Start,
  ActionTypes_Invoke = X.ActionTypes.Invoke,
  SpecialTargets_Parent = X.SpecialTargets.Parent;

// ---- event types named like Object.prototype members ----
// xstate 4 keeps a state node's transitions per event type in plain objects (__cache.candidates, read
// for every event, and the 'on' map built at start): there an event named "constructor", "toString"
// or "__proto__" finds Object.prototype's member instead of nothing, so sending one throws inside the
// machine, and a machine declaring a transition on one cannot start. A machine bundled with its own
// xstate has its own StateNode class, which the harness cannot patch at the source; so each class in
// use (the shared copy's, and the class of the bundle's machine, in bind) gets both lookups made on
// objects without a prototype, which is all that differs from a plain event type.
const objectCreate = Object.create;
function withoutPrototype(o) {
  const out = objectCreate(null);
  const keys = objectKeys(o);
  for (let i = 0; i < keys.length; i++) out[keys[i]] = o[keys[i]];
  return out;
}
const protectedNodeClasses = new $WeakMap();
export function protectEventLookups(nodeProto) {
  // The prototype that defines them (a subclass's prototype does not); left alone when it does not
  // look like xstate 4.7+'s StateNode, whose layout this relies on.
  let p = nodeProto;
  while (p !== null && !hasOwn(p, 'getCandidates')) p = getPrototypeOf(p);
  if (p === null || I.weakMapGet(protectedNodeClasses, p)) return;
  const getCandidates = p.getCandidates;
  const on = I.getOwnPropertyDescriptor(p, 'on');
  if (typeof getCandidates !== 'function' || !on || typeof on.get !== 'function' || !on.configurable) return;
  I.weakMapSet(protectedNodeClasses, p, true);
  const originalOn = on.get;
  p.getCandidates = function (eventName) {
    const cache = this.__cache;
    if (cache !== null && typeof cache === 'object') {
      const c = cache.candidates;
      if (c !== null && typeof c === 'object' && getPrototypeOf(c) !== null) cache.candidates = withoutPrototype(c);
    }
    return apply(getCandidates, this, [eventName]);
  };
  objectDefineProperty(p, 'on', {
    configurable: true,
    enumerable: on.enumerable,
    get: function () {
      const cache = this.__cache;
      if (cache !== null && typeof cache === 'object' && !cache.on) {
        // what xstate's getter builds, on an object without a prototype
        const map = objectCreate(null);
        const transitions = this.transitions;
        for (let i = 0; i < transitions.length; i++) {
          const type = transitions[i].eventType;
          if (!hasOwn(map, type)) map[type] = [];
          arrayPush(map[type], transitions[i]);
        }
        cache.on = map;
      }
      return apply(originalOn, this, []);
    },
  });
}
protectEventLookups(X.StateNode.prototype);

// ---- xstate's session registry, scoped to the actor a call runs for ----
// interpreter.js registers every started interpreter (the actors and their child machines) and
// sendTo falls back to registry.get(to) for string targets: shared as is, it hands one instance's
// machine code the live interpreters of every other instance of the version.
const sessions = new I.Map(); // sessionId -> { owner: actor key, actor }
// Each actor's session ids, so that freeing an actor's sessions does not walk every live actor's.
const sessionsByOwner = new I.Map(); // actor key -> Map(sessionId -> true)
registry.register = function (id, actor) {
  if (active === null) return id;
  const previous = mapGet(sessions, id);
  if (previous !== undefined) forgetSession(previous.owner, id);
  mapSet(sessions, id, { owner: active.key, actor: actor });
  let ids = mapGet(sessionsByOwner, active.key);
  if (ids === undefined) {
    ids = new I.Map();
    mapSet(sessionsByOwner, active.key, ids);
  }
  mapSet(ids, id, true);
  return id;
};
registry.get = function (id) {
  const s = mapGet(sessions, id);
  return s !== undefined && active !== null && s.owner === active.key ? s.actor : undefined;
};
registry.free = function (id) {
  const s = mapGet(sessions, id);
  if (s === undefined) return;
  mapDelete(sessions, id);
  forgetSession(s.owner, id);
};
function forgetSession(owner, id) {
  const ids = mapGet(sessionsByOwner, owner);
  if (ids === undefined) return;
  mapDelete(ids, id);
  if (I.mapSize(ids) === 0) mapDelete(sessionsByOwner, owner);
}
export function freeSessionsOf(key) {
  const ids = mapGet(sessionsByOwner, key);
  if (ids === undefined) return;
  mapDelete(sessionsByOwner, key);
  mapForEach(ids, function (_, id) {
    mapDelete(sessions, id);
  });
}

// ---- actors ----
const CHILD_KINDS = [
  ['spawnPromise', 'promise'],
  ['spawnCallback', 'callback'],
  ['spawnMachine', 'machine'],
  ['spawnObservable', 'observable'],
  ['spawnBehavior', 'behavior'],
  ['spawnActor', 'actor'],
];
const SPAWNS = CHILD_KINDS.map(function (pair) {
  return [pair[0], pair[1], proto[pair[0]]];
});

function describeTarget(to) {
  if (to === undefined || to === null) return undefined;
  if (typeof to === 'string') return to;
  if (isPersistentRef(to)) return refOf(to);
  if (typeof to === 'object' && typeof to.id === 'string') return to.id;
  return undefined;
}

export function createInterpreter(rec, m) {
  const key = rec.key;
  const clock = {
    setTimeout(fn, ms) {
      const meta = rec.pendingMeta;
      rec.pendingMeta = null;
      return internal.addTimer(key, fn, ms, meta);
    },
    clearTimeout(id) {
      internal.clearTimer(id);
    },
  };
  const interp = X_interpret(m, { clock, devTools: false });
  interp.defer = function (sendAction) {
    // (as xstate's defer tells them apart) a delayed event to itself is delivered to whatever the
    // actor is when it fires, so the actor may rest meanwhile
    if (!sendAction.to) {
      deferToSelf(rec, sendAction, this.delayedEventsMap);
      return;
    }
    const meta = { event: jsonCopy(sendAction._event.data) };
    if (sendAction.id !== undefined) meta.sendId = $String(sendAction.id);
    const to = describeTarget(sendAction.to);
    if (to !== undefined) meta.to = to;
    rec.pendingMeta = meta;
    try {
      return apply(P.defer, this, [sendAction]);
    } finally {
      rec.pendingMeta = null;
    }
  };
  // send, sendTo and _exec are per-instance closures in xstate 4 (own properties, set by the constructor)
  const originalSend = interp.send,
    originalSendTo = interp.sendTo,
    originalExec = interp._exec;
  interp.send = function (event, payload) {
    try {
      return apply(originalSend, this, [event, payload]);
    } catch (e) {
      fail(rec, e);
      throw e;
    }
  };
  interp.sendTo = function (event, to, immediate) {
    const problem = persistentRefProblem(to);
    if (problem !== undefined) throw new $Error('sendTo: ' + problem);
    if (isPersistentRef(to)) {
      arrayPush(rec.outbound, { to: refOf(to), event: jsonCopy(event.data) });
      return;
    }
    if (typeof to === 'string' && hasOwn(rec.invokes, to)) {
      arrayPush(rec.outbound, { to: refOf(rec.invokes[to]), event: jsonCopy(event.data) });
      return;
    }
    if (to === SpecialTargets_Parent && !this.parent) {
      arrayPush(rec.outbound, { to: 'parent', event: jsonCopy(event.data) });
      return;
    }
    return apply(originalSendTo, this, [event, to, immediate]);
  };
  interp._exec = function (action, context, _event, actionFunctionMap) {
    const activity = action && action.type === ActionTypes_Start ? action.activity : undefined;
    const src = activity && activity.type === ActionTypes_Invoke ? activity.src : undefined;
    if (src && typeof src === 'object' && src.type === 'statebacked.invoke' && typeof src.machineName === 'string') {
      const request = {
        kind: 'invoke',
        id: $String(activity.id),
        machineName: src.machineName,
        machineInstanceName: typeof src.machineInstanceName === 'string' ? src.machineInstanceName : internal.randomUUID(),
      };
      if (typeof src.machineVersionId === 'string') request.machineVersionId = src.machineVersionId;
      const data = activity.data;
      if (typeof data === 'function') request.context = jsonCopy(data(context, _event.data));
      else if (data && typeof data === 'object') {
        const c = {};
        const keys = objectKeys(data);
        for (let i = 0; i < keys.length; i++) {
          const k = keys[i];
          c[k] = typeof data[k] === 'function' ? data[k](context, _event.data) : data[k];
        }
        request.context = jsonCopy(c);
      }
      arrayPush(rec.spawns, request);
      // The invoke id names the persistent child for sendTo (wire-protocol §7.4); kept in snapshots.
      rec.invokes[request.id] = {
        type: 'statebacked.instance',
        id: request.id,
        machineName: request.machineName,
        machineInstanceName: request.machineInstanceName,
      };
      return;
    }
    return apply(originalExec, this, [action, context, _event, actionFunctionMap]);
  };
  for (let i = 0; i < SPAWNS.length; i++) {
    const kind = SPAWNS[i][1],
      original = SPAWNS[i][2];
    interp[SPAWNS[i][0]] = function () {
      const child = apply(original, this, arguments);
      if (child !== null && typeof child === 'object')
        I.weakMapSet(rec.kinds === null ? (rec.kinds = new $WeakMap()) : rec.kinds, child, kind);
      return child;
    };
  }
  apply(P.onTransition, interp, [
    function (state) {
      if (state.changed !== false) {
        rec.transitions++;
        rec.changed = true;
      }
    },
  ]);
  return interp;
}

export function rearm(rec, timer) {
  const event = timer.event;
  const to = timer.to;
  if (to === undefined) {
    rearmToSelf(rec, timer, rec.interp.delayedEventsMap);
    return;
  }
  const fn = function () {
    rec.interp.sendTo(X_toSCXMLEvent(event), to, true);
  };
  const meta = { event, to };
  if (timer.sendId !== undefined) meta.sendId = timer.sendId;
  const id = internal.rearmTimer(rec.key, fn, $String(timer.id), I.Number(timer.dueAt), meta);
  if (timer.sendId !== undefined) rec.interp.delayedEventsMap[timer.sendId] = id;
}

// A delayed event an actor sends itself ('after', a send with a delay and no target) is delivered to
// whatever the actor is when its timer fires: its interpreter, or its resting State (pure steps).
// Its timer id is kept by send id in map, the interpreter's delayedEventsMap or the resting actor's
// own (rec.delayed), for a cancel to find it, as xstate's defer and cancel do.
function deliverToSelf(rec, scxml) {
  if (rec.interp !== null) rec.interp.send(scxml);
  else pureSend(rec, scxml);
}
export function deferToSelf(rec, sendAction, map) {
  const meta = { event: jsonCopy(sendAction._event.data) };
  if (sendAction.id !== undefined) meta.sendId = $String(sendAction.id);
  const scxml = sendAction._event;
  const id = internal.addTimer(
    rec.key,
    function () {
      deliverToSelf(rec, scxml);
    },
    sendAction.delay,
    meta,
  );
  if (sendAction.id) map[sendAction.id] = id;
}
export function rearmToSelf(rec, timer, map) {
  const event = timer.event;
  const meta = { event };
  if (timer.sendId !== undefined) meta.sendId = timer.sendId;
  const id = internal.rearmTimer(
    rec.key,
    function () {
      deliverToSelf(rec, X_toSCXMLEvent(event));
    },
    $String(timer.id),
    I.Number(timer.dueAt),
    meta,
  );
  if (timer.sendId !== undefined) map[timer.sendId] = id;
}
/** The map of a resting actor's delayed events (made when first needed). */
export function restingDelayed(rec) {
  return rec.delayed !== null ? rec.delayed : (rec.delayed = {});
}

/**
 * What restoring needs from a state is what xstate's State constructor reads from its config (the
 * rest it derives: event from _event, and resolveState recomputes configuration, meta, tags and
 * done). So the state's own properties are copied without those derived ones (State#toJSON would
 * copy them all once more; this is ≈ half of reading a step's result back), and without the
 * history, session, pending actions and children, which a rebuilt actor must not inherit. Its value
 * and context travel beside it in the step result (the head keeps them), so they are left out too and
 * a marker says so (snapshot.ts puts them back).
 */
const NOT_IN_SNAPSHOT = {
  history: true,
  _sessionid: true,
  actions: true,
  children: true,
  value: true,
  context: true,
  event: true,
  meta: true,
  tags: true,
  configuration: true,
  transitions: true,
  machine: true,
};
export function snapshotOf(state, rec) {
  const out = {};
  const keys = objectKeys(state);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    if (hasOwn(NOT_IN_SNAPSHOT, k) || typeof state[k] === 'function') continue;
    out[k] = state[k];
  }
  const hasContext = state.context !== undefined && state.context !== null;
  if (!hasContext && state.context !== undefined) out.context = state.context;
  out.__fromHead = { value: true, context: hasContext };
  out.actions = [];
  out.children = {};
  const snapshot = { xstate: 4, state: out };
  if (objectKeys(rec.invokes).length > 0) snapshot.invokes = rec.invokes;
  return snapshot;
}
