/**
 * The in-isolate harness: an ES module evaluated once per isolate, after the globals and BEFORE the
 * user bundle (so it can take the hidden plumbing object before user code can see it), and bound to
 * the bundle's namespace afterwards by a tiny entry module. The host calls its exports through
 * references obtained once (applySync, ≈ 1.6 µs a crossing); every argument and result is a string
 * or a number, so no object crosses the boundary (the one exception: `deliver` also receives a
 * host-made ArrayBuffer copy of a fetch response body).
 *
 * Live actors of v4 machines are xstate v4 interpreters of the shared xstate copy (also for bundles
 * that carry their own xstate: that copy's `spawn` cannot see our interpreter, which is why State
 * Backed tells users to use spawnEphemeralInstance → __statebacked_rt.spawn, installed here). Live
 * actors of v5 machines are Actors of the shared xstate 5 copy (see "XState v5 machines" below).
 * Each v4 interpreter gets:
 * - a host-driven clock; `defer` is wrapped so each timer knows the delayed event it carries;
 * - `send` wrapped to record the first exception (also ones raised in promise callbacks), so the
 *   host can discard the actor instead of keeping a half-transitioned one;
 * - `sendTo` wrapped to turn sends to `{type:"statebacked.instance"}` refs (and sendParent without a
 *   local parent) into outbound durable sends reported to the host;
 * - `_exec` wrapped to report invokes of `persistentInvocableSource(...)` sources;
 * - the spawn* methods wrapped to know each running child's kind.
 * The StateNode classes in use (the shared copy's and a bundled copy's) look transitions up by event
 * type without Object.prototype in the way, so "constructor" or "__proto__" are event types like any
 * other (protectEventLookups).
 * A mutating call (start/send/advance) is followed by `collect`, which runs after the isolate has
 * drained its microtasks (isolated-vm does so when a sync call returns), so the result reflects
 * promises that resolved meanwhile.
 *
 * Isolation between the instances sharing the isolate:
 * - xstate's session registry (which `sendTo` consults for string targets it does not find among
 *   the children) is replaced by a harness-private one scoped to the actor the call runs for, so
 *   machine code cannot find or drive another instance's interpreters by session id ("x:0", ...);
 *   user bundles cannot import xstate's registry or serviceScope modules (xstate-sources.ts);
 * - the harness uses built-ins captured before any user code ran (globals.js intrinsics,
 *   xstate's Interpreter/State methods at install time), so machine code replacing prototype
 *   methods cannot make it look up, collect or drive another actor; collect refuses to run once
 *   JSON.stringify was replaced (the step fails with an error naming it).
 * - each exported entry starts a new console budget (internal.beginCall).
 */
import * as X from 'xstate';
import { registry } from 'xstate/lib/registry';
import { provide } from 'xstate/lib/serviceScope';
import { updateHistoryValue as X_updateHistoryValue } from 'xstate/lib/utils';
import { makeUpgrades } from 'statehold:upgrade';

const internal = globalThis.__statehold_internal;
delete globalThis.__statehold_internal;
if (!internal) throw new Error('statehold harness: the globals were not installed');
/** Starts the message of the error the harness throws when machine code tampered with what it relies on (the host's TAMPERED_MARKER). */
const TAMPERED_MARKER = internal.tamperedMarker;

// ---- built-ins and xstate methods captured before any user code runs ----
const I = internal.intrinsics;
const apply = I.apply,
  mapGet = I.mapGet,
  mapSet = I.mapSet,
  mapDelete = I.mapDelete,
  mapForEach = I.mapForEach;
const arrayPush = I.arrayPush,
  objectKeys = I.objectKeys,
  hasOwn = I.hasOwn,
  $String = I.String,
  $Error = I.Error;
const jsonStringify = I.jsonStringify,
  jsonParse = I.jsonParse,
  JSON_OBJECT = JSON;
const proto = X.Interpreter.prototype;

// ---- tampering that would reach into the steps of other instances ----
// JSON.stringify, even the copy captured above, calls toJSON on every object it writes, and the
// harness serialises the state of every instance of the version in this one isolate: a toJSON that
// machine code puts on a built-in prototype would run inside other instances' steps, seeing and
// changing their state. Checked as every call from the host begins (collect included, so right after
// the step that did it); the host then throws this isolate away and loads the version afresh.
const GUARDED_PROTOTYPES = [
  Object.prototype,
  Array.prototype,
  Function.prototype,
  Error.prototype,
  RegExp.prototype,
  Map.prototype,
  Set.prototype,
  WeakMap.prototype,
  WeakSet.prototype,
  Promise.prototype,
  BigInt.prototype,
  Symbol.prototype,
  String.prototype,
  Number.prototype,
  Boolean.prototype,
];
const DATE_PROTOTYPE = Date.prototype,
  DATE_TO_JSON = Date.prototype.toJSON;
// Their own prototypes too: an object (or a Proxy) slipped into the chain would carry a toJSON past
// the own-property check.
const getPrototypeOf = Object.getPrototypeOf;
const GUARDED_PARENTS = GUARDED_PROTOTYPES.map(function (p) {
  return getPrototypeOf(p);
});
function enterCall() {
  internal.beginCall();
  let what;
  const dateToJson = I.getOwnPropertyDescriptor(DATE_PROTOTYPE, 'toJSON');
  if (JSON_OBJECT.stringify !== jsonStringify || globalThis.JSON !== JSON_OBJECT) what = 'replaced JSON.stringify';
  else if (!dateToJson || dateToJson.value !== DATE_TO_JSON || getPrototypeOf(DATE_PROTOTYPE) !== GUARDED_PROTOTYPES[0])
    what = 'replaced Date.prototype.toJSON';
  else {
    for (let i = 0; i < GUARDED_PROTOTYPES.length; i++) {
      if (hasOwn(GUARDED_PROTOTYPES[i], 'toJSON')) {
        what = 'defined toJSON on a built-in prototype';
        break;
      }
      if (getPrototypeOf(GUARDED_PROTOTYPES[i]) !== GUARDED_PARENTS[i]) {
        what = 'changed the prototype of a built-in prototype';
        break;
      }
    }
  }
  if (what !== undefined) {
    throw new $Error(
      TAMPERED_MARKER + 'machine code ' + what + ', which the sandbox does not allow (it would run inside the steps of other instances)',
    );
  }
}
const P = {
  defer: proto.defer,
  _stop: proto._stop,
  start: proto.start,
  onTransition: proto.onTransition,
  removeChild: proto.removeChild,
  update: proto.update,
  state: I.getOwnPropertyDescriptor(proto, 'state').get,
};
const X_interpret = X.interpret,
  X_spawn = X.spawn,
  X_toSCXMLEvent = X.toSCXMLEvent;
const LOGGER = X.Interpreter.defaultOptions.logger;
const ActionTypes_Start = X.ActionTypes.Start,
  ActionTypes_Invoke = X.ActionTypes.Invoke,
  SpecialTargets_Parent = X.SpecialTargets.Parent;
const objectDefineProperty = I.objectDefineProperty,
  $WeakMap = WeakMap;

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
function protectEventLookups(nodeProto) {
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
function freeSessionsOf(key) {
  const ids = mapGet(sessionsByOwner, key);
  if (ids === undefined) return;
  mapDelete(sessionsByOwner, key);
  mapForEach(ids, function (_, id) {
    mapDelete(sessions, id);
  });
}

let bundle = null;
export function bind(ns) {
  if (bundle !== null) throw new Error('statehold harness: already bound');
  bundle = ns;
  try {
    const m = ns.default;
    v5 = isV5Machine(m);
    if (!v5 && m !== null && typeof m === 'object' && m.__xstatenode === true) protectEventLookups(getPrototypeOf(m));
  } catch (_) {
    /* inspect() reports an unreadable default export */
  }
}

const actors = new I.Map();
let active = null; // the actor record the current call runs for

function errorText(e) {
  try {
    if (e && typeof e === 'object' && 'message' in e) return $String(e.name || 'Error') + ': ' + $String(e.message);
    return 'thrown value: ' + $String(e);
  } catch (_) {
    return 'unprintable thrown value';
  }
}
function jsonCopy(v) {
  return v === undefined ? undefined : jsonParse(jsonStringify(v));
}
function isPersistentRef(to) {
  return (
    to !== null &&
    typeof to === 'object' &&
    to.type === 'statebacked.instance' &&
    typeof to.machineName === 'string' &&
    typeof to.machineInstanceName === 'string'
  );
}
function refOf(to) {
  const ref = { type: 'statebacked.instance', machineName: to.machineName, machineInstanceName: to.machineInstanceName };
  if (typeof to.id === 'string') ref.id = to.id;
  return ref;
}

// ---- @statebacked/machine runtime hook (both spellings: 0.6.0 has the "__statebaked_rt" typo) ----
const rt = {
  spawn(entity, nameOrOptions) {
    if (entity !== null && typeof entity === 'object' && typeof entity.machineName === 'string' && !entity.__xstatenode) {
      const opts = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : nameOrOptions || {};
      const id = typeof opts.name === 'string' ? opts.name : internal.randomUUID();
      const machineInstanceName = typeof entity.machineInstanceName === 'string' ? entity.machineInstanceName : internal.randomUUID();
      const request = { kind: 'spawn', id, machineName: entity.machineName, machineInstanceName };
      if (typeof entity.machineVersionId === 'string') request.machineVersionId = entity.machineVersionId;
      if (opts.context !== undefined) request.context = jsonCopy(opts.context);
      if (!active) throw new $Error('spawnPersistentInstance must be called inside an assign of a running machine');
      arrayPush(active.spawns, request);
      return { type: 'statebacked.instance', id, machineName: entity.machineName, machineInstanceName };
    }
    if (v5)
      throw new $Error(
        'spawnEphemeralInstance is for XState v4 machines: an XState v5 machine spawns with the spawn argument of assign, or spawnChild',
      );
    return X_spawn(entity, nameOrOptions);
  },
};
for (const name of ['__statebacked_rt', '__statebaked_rt']) {
  objectDefineProperty(globalThis, name, { value: rt, writable: true, configurable: true, enumerable: false });
}

function machine() {
  return bundle.default;
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

function newRecord(key, name) {
  // interp: the live interpreter, or null while the actor rests (state: its State; see pure steps);
  // delayed: while it rests, its delayed events' timer ids by send id (the interpreter's delayedEventsMap)
  return {
    key,
    name,
    interp: null,
    state: null,
    failure: null,
    transitions: 0,
    changed: false,
    spawns: [],
    outbound: [],
    invokes: {},
    kinds: null,
    pendingMeta: null,
    actor: null,
    rearm: null,
    last: null,
    invokeSources: {},
    delayed: null,
  };
}
/** The actor's current State, live or resting. */
function stateOf(rec) {
  return rec.interp !== null ? apply(P.state, rec.interp, []) : rec.actor !== null ? apply(P5.getSnapshot, rec.actor, []) : rec.state;
}
// rec.failure is tested for truth: a falsy thrown value (undefined, null, false, 0, '') is kept as an
// Error saying what was thrown, or the step would pass as a success.
function fail(rec, e) {
  if (!rec.failure) rec.failure = e ? e : new $Error((e === '' ? 'an empty string' : $String(e)) + ' was thrown');
}

function describeTarget(to) {
  if (to === undefined || to === null) return undefined;
  if (typeof to === 'string') return to;
  if (isPersistentRef(to)) return refOf(to);
  if (typeof to === 'object' && typeof to.id === 'string') return to.id;
  return undefined;
}

function createInterpreter(rec, m) {
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

function rearm(rec, timer) {
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
function deferToSelf(rec, sendAction, map) {
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
function rearmToSelf(rec, timer, map) {
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
function restingDelayed(rec) {
  return rec.delayed !== null ? rec.delayed : (rec.delayed = {});
}

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
let P5 = null; // Actor methods captured when the copy was bound (before user code could reach them)
let v5 = false; // the bundle's default export is a v5 machine
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
function isV5Machine(m) {
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
function checkV5Node(node, depth) {
  if (depth > 100) return;
  if (node.type === 'compound') void node.initial;
  void node.transitions;
  const children = node.states !== null && typeof node.states === 'object' ? node.states : {};
  const keys = objectKeys(children);
  for (let i = 0; i < keys.length; i++) checkV5Node(children[keys[i]], depth + 1);
}

/** A machine's default context as a context: a JSON object (anything else, an array too, counts as {}). */
function contextOr(value) {
  return value !== null && typeof value === 'object' && !I.isArray(value) ? value : {};
}

/**
 * The machine instances run: the bundle's, except that a machine whose context is an object (or
 * none) gets a context factory merging the instance's initial context over it, shallowly, as v4
 * instances get theirs; a machine with a context factory computes its context from the input itself.
 * Built once per version (a StateMachine builds its node tree when constructed).
 */
function machine5() {
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
const PERSISTENT_INVOKE = new $WeakMap(); // logic -> the statebacked.invoke src it stands for
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

function createActor5(rec, m, options) {
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
function checkFailed5(rec) {
  if (rec.actor === null || rec.failure) return;
  const st = apply(P5.getSnapshot, rec.actor, []);
  if (st !== null && typeof st === 'object' && st.status === 'error') fail(rec, st.error);
}

function startActor5(rec, init) {
  const m = machine5();
  if (init.snapshot) {
    // A snapshot an upgrade made (upgrade-harness.js): rebuilt for this version's machine.
    const upgraded = init.snapshot.state.__upgradeHistory !== undefined;
    const s = upgraded ? upgradedState5(m, init.snapshot.state) : init.snapshot.state;
    if (upgraded) keepPersistentInvokes5(m, init.snapshot);
    s.children = {};
    const invokes = init.snapshot.invokes,
      sources = init.snapshot.invokeSources;
    if (invokes !== null && typeof invokes === 'object' && sources !== null && typeof sources === 'object') {
      rec.invokes = invokes;
      rec.invokeSources = sources;
      const ids = objectKeys(invokes);
      for (let i = 0; i < ids.length; i++) {
        if (hasOwn(sources, ids[i])) s.children[ids[i]] = { snapshot: { status: 'active', restored: true }, src: sources[ids[i]] };
      }
    }
    const actor = createActor5(rec, m, { snapshot: s });
    if (!upgraded) restoreNodeOrder5(apply(P5.getSnapshot, actor, []), init.snapshot.nodeOrder);
    apply(P5.start, actor, []);
    const timers = (upgraded ? timersForMajor(5, init.pendingTimers) : init.pendingTimers) || [];
    for (let i = 0; i < timers.length; i++) {
      const t = timers[i];
      if (t && t.kind === 'event') rearm5(rec, t);
    }
    rec.transitions = 0;
    rec.changed = false;
  } else {
    const actor = createActor5(rec, m, { input: init.context || {} });
    apply(P5.start, actor, []);
  }
  checkFailed5(rec);
}

/** Re-arms a persisted event timer through the scheduler: same id, same due time, cancellable by its send id. */
function rearm5(rec, timer) {
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

function sendEvent5(rec, event) {
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

function runningChildren5(rec) {
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
function stopChildren5(rec) {
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
function restoreNodeOrder5(st, order) {
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
function snapshotOf5(st, rec) {
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
function outputOf5(input) {
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
const spawnGuard = {
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

function pureMachine() {
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
function pureSend(rec, event) {
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
function pureStart(rec, m, context) {
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
function keepValueOrder(value, like) {
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
function restingState(m, s) {
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
function restIfIdle(rec, pendingTimers) {
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

function discard(rec) {
  if (mapGet(actors, rec.key) === rec) mapDelete(actors, rec.key);
  if (active === rec) active = null;
  internal.clearOwner(rec.key);
  // results of the actor's host calls (fetch) in flight must not reach a discarded or rebuilt actor
  internal.dropHostCalls(rec.key);
  if (rec.interp) {
    // _stop (not stop): no exit actions run; eviction and failure are not machine transitions
    try {
      apply(P._stop, rec.interp, []);
    } catch (_) {
      /* the actor is being dropped anyway */
    }
  }
  if (rec.actor) {
    // xstate 5's stop runs no exit actions either; its outbound sends and spawns are not reported any more
    try {
      apply(P5._stop, rec.actor, []);
    } catch (_) {
      /* the actor is being dropped anyway */
    }
    rec.actor = null;
  }
  rec.state = null;
  rec.delayed = null;
  freeSessionsOf(rec.key);
  internal.clearOwner(rec.key);
}

/** Object.assign without its [[Set]]: a key named __proto__ becomes a property, not the prototype. */
function assignOwn(target, source) {
  const keys = objectKeys(source);
  for (let i = 0; i < keys.length; i++)
    objectDefineProperty(target, keys[i], { value: source[keys[i]], writable: true, enumerable: true, configurable: true });
  return target;
}

function enter(rec, now) {
  active = rec;
  internal.enter(rec.key, rec.name, now);
}

/** @param {string} key @param {string} name @param {string} initJson @param {number} now @returns {string} (a call from the host: version-isolate.ts) */
export function start(key, name, initJson, now) {
  enterCall();
  startActor(key, name, jsonParse(initJson), now);
  return '';
}

/** allowWrite for a new instance, then its start when it allows: one crossing instead of two. */
/** @param {string} key @param {string} name @param {string} initJson @param {number} now @param {string} requestJson @returns {string} (a call from the host: version-isolate.ts) */
export function authorizeAndStart(key, name, initJson, now, requestJson) {
  enterCall();
  if (authorizeWith('write', jsonParse(requestJson)) !== 'true') return 'rejected';
  startActor(key, name, jsonParse(initJson), now);
  return '';
}

/**
 * A step's call may carry the actor's committed snapshot when the host knows it is not live here
 * (evicted, or a new isolate): it is restored first, in the same call, instead of a start of its own.
 */
function restoreIfGiven(key, restoreJson, now) {
  if (restoreJson === undefined || restoreJson === '') return;
  const restore = jsonParse(restoreJson);
  const snapshot = typeof restore.snapshot === 'string' ? jsonParse(restore.snapshot) : restore.snapshot;
  // what snapshot.ts's restoredSnapshot does on the host: the head's value and context go back in
  const state = snapshot.state;
  const marker = state.__fromHead;
  if (marker !== undefined) {
    delete state.__fromHead;
    state.value = restore.value;
    if (marker.context) state.context = restore.context;
  }
  startActor(key, restore.name, { snapshot: snapshot, pendingTimers: restore.pendingTimers }, now);
}

/** Whether a restored actor's persisted timers are all delayed events to itself (the rest are not re-armed). */
function delayedToSelfOnly(timers) {
  for (let i = 0; i < timers.length; i++) {
    const t = timers[i];
    if (t && t.kind === 'event' && t.to !== undefined) return false;
  }
  return true;
}

function startActor(key, name, init, now) {
  const existing = mapGet(actors, key);
  if (existing) discard(existing);
  const rec = newRecord(key, name);
  mapSet(actors, key, rec);
  enter(rec, now);
  try {
    if (v5) {
      startActor5(rec, init);
      return;
    }
    const base = machine();
    if (init.snapshot) {
      // A snapshot an upgrade made (upgrade-harness.js): rebuilt for this version's machine.
      const upgraded = init.snapshot.state.__upgradeHistory !== undefined;
      const s = upgraded ? upgradedState4(base, init.snapshot) : init.snapshot.state;
      s.actions = [];
      s.children = {};
      delete s.history;
      delete s._sessionid;
      if (init.snapshot.invokes && typeof init.snapshot.invokes === 'object') rec.invokes = init.snapshot.invokes;
      const timers = (upgraded ? timersForMajor(4, init.pendingTimers) : init.pendingTimers) || [];
      if (pureMachine() && delayedToSelfOnly(timers)) {
        // what Interpreter#start does with a state config, without the interpreter
        rec.state = provide(spawnGuard, function () {
          return restingState(base, s);
        });
        for (let i = 0; i < timers.length; i++) {
          const t = timers[i];
          if (t && t.kind === 'event') rearmToSelf(rec, t, restingDelayed(rec));
        }
        return;
      }
      rec.interp = createInterpreter(rec, base);
      apply(P.start, rec.interp, [s]);
      keepValueOrder(rec.interp.state.value, s.value);
      for (let i = 0; i < timers.length; i++) {
        const t = timers[i];
        if (t && t.kind === 'event') rearm(rec, t);
      }
      rec.transitions = 0;
      rec.changed = false;
    } else {
      const defaults = jsonCopy(base.context);
      const context = assignOwn(assignOwn({}, contextOr(defaults)), init.context || {});
      if (pureMachine() && pureStart(rec, base, context)) return;
      // The initial state is computed on the shared machine with this instance's context instead of
      // machine.withContext(context), which rebuilds the whole StateNode tree per instance (≈ 2.5x
      // the start cost and memory). Shadowing the initialState getter keeps xstate's own order:
      // start() reads it once the interpreter is Running, inside provide(), so spawn() in an initial
      // assign starts real children; its actions (entry, invokes) are then executed by start().
      const interp = createInterpreter(rec, base);
      rec.interp = interp;
      objectDefineProperty(interp, 'initialState', {
        configurable: true,
        get: function () {
          if (!interp._initialState) {
            interp._initialState = provide(interp, function () {
              return base.getInitialState(base.initialStateValue, context);
            });
          }
          return interp._initialState;
        },
      });
      apply(P.start, interp, []);
    }
  } catch (e) {
    fail(rec, e);
  }
}

// ---- upgrades (upgrade-harness.js) ----
const upgrades = makeUpgrades({
  I: I,
  internal: internal,
  enterCall: enterCall,
  jsonCopy: jsonCopy,
  assignOwn: assignOwn,
  outputOf5: outputOf5,
  machine5: machine5,
  X_toSCXMLEvent: X_toSCXMLEvent,
  X_updateHistoryValue: X_updateHistoryValue,
  PERSISTENT_INVOKE: PERSISTENT_INVOKE,
  bundle: function () {
    return bundle;
  },
  isV5: function () {
    return v5;
  },
});
const upgradedState4 = upgrades.upgradedState4,
  upgradedState5 = upgrades.upgradedState5;
const keepPersistentInvokes5 = upgrades.keepPersistentInvokes5,
  timersForMajor = upgrades.timersForMajor;
/** A migration bundle's work (upgrade-harness.js migrate). */
/** @param {string} inputJson @returns {string} (a call from the host: version-isolate.ts) */
export function migrate(inputJson) {
  return upgrades.migrate(inputJson);
}
/** The paths a v5 instance's history states remember (upgrade-harness.js rememberedPaths5). */
/** @param {string} snapshotJson @returns {string} (a call from the host: version-isolate.ts) */
export function rememberedPaths5(snapshotJson) {
  return upgrades.rememberedPaths5(snapshotJson);
}

/** @param {string} key @param {string} eventJson @param {number} now @param {string} [restoreJson] @returns {string} (a call from the host: version-isolate.ts) */
export function send(key, eventJson, now, restoreJson) {
  enterCall();
  restoreIfGiven(key, restoreJson, now);
  return sendEvent(key, eventJson, now);
}

function sendEvent(key, eventJson, now) {
  const rec = mapGet(actors, key);
  if (!rec) return 'no-actor';
  if (rec.failure) return ''; // its restore failed: collect reports it
  enter(rec, now);
  const event = jsonParse(eventJson);
  if (rec.actor === null && unhandledErrorEvent(rec, event)) {
    // xstate 4 throws on an error.platform event the state has no transition for. The runtime sends one
    // for each child it stopped at the settling timeout; thrown, it would fail every later event too.
    internal.logError(
      event.type + ' (a child stopped because the machine did not settle in time) has no transition in this state: ignored',
    );
    return '';
  }
  try {
    if (rec.actor !== null) sendEvent5(rec, event);
    else if (rec.interp !== null) rec.interp.send(event);
    else pureSend(rec, event);
  } catch (e) {
    fail(rec, e);
  }
  return '';
}

/** The condition under which xstate 4's interpreter throws an error.platform event instead of taking it. */
function unhandledErrorEvent(rec, event) {
  const type = event !== null && typeof event === 'object' ? event.type : event;
  if (typeof type !== 'string' || I.stringSlice(type, 0, 14) !== 'error.platform') return false;
  // (an own getter xstate's State constructor defines on each state)
  const next = stateOf(rec).nextEvents;
  for (let i = 0; i < next.length; i++) if (I.stringSlice($String(next[i]), 0, 14) === 'error.platform') return false;
  return true;
}

/** allowWrite, then the event when it allows: one crossing instead of two on the hot path. */
/** @param {string} key @param {string} callerJson @param {string} eventJson @param {number} now @param {string} [restoreJson] @returns {string} (a call from the host: version-isolate.ts) */
export function authorizeAndSend(key, callerJson, eventJson, now, restoreJson) {
  enterCall();
  restoreIfGiven(key, restoreJson, now);
  const rec = mapGet(actors, key);
  if (!rec) return 'no-actor';
  if (rec.failure) return '';
  // The live actor holds exactly the committed state: the authorizer gets a copy of it, so the host
  // need not send the state and context over again with every event.
  const caller = jsonParse(callerJson);
  const st = stateOf(rec);
  const request = {
    type: 'event',
    machineInstanceName: caller.machineInstanceName,
    state: jsonCopy(st.value),
    context: st.context === undefined || st.context === null ? {} : jsonCopy(st.context),
    event: jsonParse(eventJson),
    authContext: caller.authContext,
  };
  if (authorizeWith('write', request) !== 'true') return 'rejected';
  return sendEvent(key, eventJson, now);
}

/** @param {string} key @param {number} now @param {string} [restoreJson] @returns {string} (a call from the host: version-isolate.ts) */
export function advance(key, now, restoreJson) {
  enterCall();
  restoreIfGiven(key, restoreJson, now);
  const rec = mapGet(actors, key);
  if (!rec) return 'no-actor';
  if (rec.failure) return '';
  enter(rec, now);
  internal.fireDue(key, now, function (e, timer) {
    if (timer.meta) {
      fail(rec, e);
      return false;
    }
    internal.logError('uncaught exception in a timer callback: ' + errorText(e));
    return true;
  });
  checkFailed5(rec);
  return '';
}

/** @param {string} key @returns {string} (a call from the host: version-isolate.ts) */
export function stopChildren(key) {
  enterCall();
  const rec = mapGet(actors, key);
  if (!rec) return 'no-actor';
  enter(rec, Date.now());
  let ids = [];
  try {
    if (rec.actor !== null) ids = stopChildren5(rec);
    if (rec.interp !== null)
      mapForEach(rec.interp.children, function (child, id) {
        arrayPush(ids, $String(id));
        try {
          if (typeof child.stop === 'function') child.stop();
        } catch (e) {
          internal.logError('stopping child ' + $String(id) + ' threw: ' + errorText(e));
        }
      });
    if (rec.interp !== null) for (let i = 0; i < ids.length; i++) apply(P.removeChild, rec.interp, [ids[i]]);
    // timers set by the stopped services' own code die with them, and so do their host calls
    internal.clearOwner(key, 'callback');
    internal.dropHostCalls(key);
  } finally {
    active = null;
    internal.leave();
  }
  return jsonStringify(ids);
}

/** @param {string} key @returns {string} (a call from the host: version-isolate.ts) */
export function stop(key) {
  internal.beginCall();
  active = null;
  internal.reset();
  const rec = mapGet(actors, key);
  if (rec) discard(rec);
  return '';
}

function runningChildren(rec) {
  if (rec.actor !== null) return runningChildren5(rec);
  const list = [];
  if (rec.interp === null) return list;
  mapForEach(rec.interp.children, function (child, id) {
    arrayPush(list, { id: $String(id), kind: (rec.kinds !== null && I.weakMapGet(rec.kinds, child)) || 'actor' });
  });
  return list;
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
function snapshotOf(state, rec) {
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

/** The state's tags; the API types them as strings, so a tag of any other type is left out. */
function tagsOf(st) {
  const tags = [];
  if (!st.tags) return tags;
  const add = function (t) {
    if (typeof t === 'string') arrayPush(tags, t);
  };
  try {
    I.setForEach(st.tags, add);
  } catch (_) {
    if (I.isArray(st.tags)) for (let i = 0; i < st.tags.length; i++) add(st.tags[i]);
  }
  return tags;
}

/** @param {string} key @returns {string} (a call from the host: version-isolate.ts) */
export function collect(key) {
  enterCall();
  active = null;
  internal.leave();
  const rec = mapGet(actors, key);
  if (!rec) return jsonStringify({ noActor: true });
  checkFailed5(rec);
  if (rec.failure) {
    const message = errorText(rec.failure);
    discard(rec);
    return jsonStringify({ error: message });
  }
  let out;
  let pendingTimers;
  try {
    const st = stateOf(rec);
    pendingTimers = internal.timersOf(key);
    // Three JSON texts, one per line (JSON.stringify never writes a line break): the rest of the
    // result, the context and the snapshot. The host passes the snapshot on unparsed to storage.
    out =
      jsonStringify({
        state: st.value,
        tags: tagsOf(st),
        done: rec.actor !== null ? st.status === 'done' : !!st.done,
        changed: rec.changed,
        pendingTimers,
        runningChildren: runningChildren(rec),
        persistentSpawns: rec.spawns,
        outboundSends: rec.outbound,
        transitions: rec.transitions,
      }) +
      '\n' +
      jsonStringify(st.context === undefined || st.context === null ? {} : st.context) +
      '\n' +
      jsonStringify(rec.actor !== null ? snapshotOf5(st, rec) : snapshotOf(st, rec));
  } catch (e) {
    discard(rec);
    return jsonStringify({ error: 'the machine state is not JSON-serialisable: ' + errorText(e) });
  }
  rec.transitions = 0;
  rec.changed = false;
  if (rec.spawns.length > 0) rec.spawns = [];
  if (rec.outbound.length > 0) rec.outbound = [];
  restIfIdle(rec, pendingTimers);
  return out;
}

/**
 * Settles a host call (fetch) that completed: runs for the actor that started it (its clock, its
 * timers, its spawns), or for none. The promise's reactions run as microtasks once this call returns;
 * the host then calls afterDeliver. Returns 'dropped' when the call was dropped meanwhile.
 */
/** @param {number} id @param {string} headJson @param {ArrayBuffer | undefined} body @param {number} now @returns {string} (a call from the host: version-isolate.ts) */
export function deliver(id, headJson, body, now) {
  enterCall();
  const owner = internal.hostCallOwner(id);
  if (owner === undefined) return 'dropped';
  if (owner !== null) {
    const rec = mapGet(actors, owner);
    const call = rec ? undefined : mapGet(httpCalls, owner);
    if (rec) enter(rec, now);
    else if (call !== undefined) {
      active = null;
      internal.enter(owner, call.name, now);
    } else {
      internal.dropHostCalls(owner);
      return 'dropped';
    }
  }
  internal.settleHostCall(id, headJson, body);
  return 'delivered';
}

/** @returns {string} (a call from the host: version-isolate.ts) */
export function afterDeliver() {
  enterCall();
  active = null;
  internal.leave();
  return '';
}

/** How many live actors rest without an interpreter and how many have one (diagnostics, tests). */
/** @returns {string} (a call from the host: version-isolate.ts) */
export function census() {
  let resting = 0,
    interpreters = 0;
  mapForEach(actors, function (rec) {
    if (rec.interp !== null || rec.actor !== null) interpreters++;
    else if (rec.state !== null) resting++;
  });
  return jsonStringify({ resting: resting, interpreters: interpreters });
}

/** Settings from the host, once after loading (JSON): { pureSteps: boolean }. */
/** @param {string} json @returns {string} (a call from the host: version-isolate.ts) */
export function configure(json) {
  const settings = jsonParse(json);
  if (settings.pureSteps === false) pureSteps = false;
  return '';
}

/** How many console entries the per-call budget dropped since the host last asked (not a new call). */
/** @returns {string} (a call from the host: version-isolate.ts) */
export function takeDroppedLogs() {
  return $String(internal.takeDropped());
}

/** Forgets the call context after a call was cut short by the CPU-time limit. */
/** @returns {string} (a call from the host: version-isolate.ts) */
export function recover() {
  internal.beginCall();
  active = null;
  pureCall = null;
  internal.reset();
  return '';
}

// ---- httpApiMapper (wire-protocol 3.14): handler and responseMapper calls ----
// A call runs under a key of its own, given by the host ("http-api:N", never an actor key, which has
// slashes): its console output, timers and fetches are attributed to it. Its result is read by httpCollect, a
// second crossing, once the isolate drained its microtasks; an async handler that waits for a fetch
// or a timer stays pending across several collects (the host waits for activity in between), and
// httpDrop forgets it, with its timers and fetches, whatever became of it.
const $Promise = Promise,
  promiseResolve = Promise.resolve,
  promiseThen = Promise.prototype.then;
const httpCalls = new I.Map(); // key -> { name, done, value, error }

/** Why there is nothing to call, or undefined when there is: text for a 404. */
function httpEntry(slug, out) {
  const mapper = bundle.httpApiMapper;
  if (mapper === undefined || mapper === null) return 'the machine version exports no httpApiMapper';
  if (typeof mapper !== 'object' && typeof mapper !== 'function')
    return 'the machine version exports an httpApiMapper that is not an object';
  if (!hasOwn(mapper, slug)) return 'the httpApiMapper of the machine version has no entry ' + jsonStringify(slug);
  out.entry = mapper[slug];
  return undefined;
}

/**
 * Starts httpApiMapper[slug][fn](input) (fn: handler or responseMapper) as the call 'key'. Answers
 * JSON: {missing} (no such entry) or {error} (reading the mapper threw), and nothing was kept; or
 * {started: true}: collect it (also when it threw at once, or is not a function).
 */
/** @param {string} key @param {string} slug @param {string} fn @param {string} inputJson @param {number} now @param {string} name @returns {string} (a call from the host: version-isolate.ts) */
export function httpCall(key, slug, fn, inputJson, now, name) {
  enterCall();
  active = null;
  internal.leave();
  const found = {};
  let missing;
  try {
    missing = httpEntry(slug, found);
  } catch (e) {
    return jsonStringify({ error: 'reading httpApiMapper threw: ' + errorText(e) });
  }
  if (missing !== undefined) return jsonStringify({ missing: missing });
  const call = { name: name, done: false, value: undefined, error: undefined };
  mapSet(httpCalls, key, call);
  // kept entered after the call returns: the microtasks it leaves run for it (collect leaves)
  internal.enter(key, name, now);
  try {
    const entry = found.entry;
    const f = entry !== null && (typeof entry === 'object' || typeof entry === 'function') ? entry[fn] : undefined;
    if (typeof f !== 'function') throw new $Error('httpApiMapper.' + slug + '.' + fn + ' is not a function');
    let input = jsonParse(inputJson);
    // responseMapper: the host gives the settled state, the harness adds what the final state yields
    if (fn === 'responseMapper') input = { state: input.state, context: input.context, result: doneDataOf(input) };
    const returned = apply(f, entry, [input]);
    apply(promiseThen, apply(promiseResolve, $Promise, [returned]), [
      function (value) {
        call.done = true;
        call.value = value;
      },
      function (e) {
        call.done = true;
        call.error = errorText(e);
      },
    ]);
  } catch (e) {
    call.done = true;
    call.error = errorText(e);
  }
  return '{"started":true}';
}

/**
 * The outcome of a call begun by httpCall: {value} (JSON of what it returned; no value for
 * undefined), {error}, or {pending} with the due time of its earliest timer (null: none), or
 * {pending, fired: true} when timers of it were due and ran now (collect again at once). A call that
 * finished is forgotten here.
 */
/** @param {string} key @param {number} now @returns {string} (a call from the host: version-isolate.ts) */
export function httpCollect(key, now) {
  enterCall();
  active = null;
  internal.leave();
  const call = mapGet(httpCalls, key);
  if (call === undefined) return jsonStringify({ error: 'the call was dropped' });
  if (call.done) {
    httpForget(key);
    if (call.error !== undefined) return jsonStringify({ error: call.error });
    try {
      const text = jsonStringify(call.value);
      return text === undefined ? '{}' : '{"value":' + text + '}';
    } catch (e) {
      return jsonStringify({ error: 'its result is not JSON-serialisable: ' + errorText(e) });
    }
  }
  const timers = internal.timersOf(key);
  if (timers.length > 0 && timers[0].dueAt <= now) {
    internal.enter(key, call.name, now);
    internal.fireDue(key, now, function (e) {
      internal.logError('uncaught exception in a timer callback: ' + errorText(e));
      return true;
    });
    return jsonStringify({ pending: true, fired: true });
  }
  return jsonStringify({ pending: true, nextDueAt: timers.length > 0 ? timers[0].dueAt : null });
}

/** Forgets a call, its timers and its fetches (finished, or given up on by the host). */
/** @param {string} key @returns {string} (a call from the host: version-isolate.ts) */
export function httpDrop(key) {
  internal.beginCall();
  active = null;
  internal.leave();
  httpForget(key);
  return '';
}

function httpForget(key) {
  mapDelete(httpCalls, key);
  internal.clearOwner(key);
  internal.dropHostCalls(key);
}

/**
 * What the machine's final state yields (its data, computed as xstate 4's interpreter does for its
 * done event, with the event given), or null: not done, not a top-level final state, or no data.
 */
function doneDataOf(input) {
  try {
    if (v5) return outputOf5(input);
    const m = machine();
    const value = input.state;
    if (!input.done || typeof value !== 'string' || m === null || typeof m !== 'object' || !m.states || !hasOwn(m.states, value))
      return null;
    const node = m.states[value];
    if (!node || node.type !== 'final' || node.doneData === undefined || node.doneData === null) return null;
    const mapper = node.doneData,
      context = input.context,
      data = input.event;
    let out;
    if (typeof mapper === 'function') out = mapper(context, data);
    else if (typeof mapper === 'object') {
      out = {};
      const keys = objectKeys(mapper);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i],
          sub = mapper[k];
        objectDefineProperty(out, k, {
          value: typeof sub === 'function' ? sub(context, data) : sub,
          writable: true,
          enumerable: true,
          configurable: true,
        });
      }
    } else out = mapper;
    return out === undefined ? null : jsonCopy(out);
  } catch (e) {
    internal.logError('computing the final state data for the http API response threw: ' + errorText(e));
    return null;
  }
}

// ---- version-level calls ----
/** @returns {string} (a call from the host: version-isolate.ts) */
export function inspect() {
  enterCall();
  // Not bound: the entry module never ran, because the bundle's evaluation is still pending.
  if (bundle === null || bundle === undefined) {
    return jsonStringify({ loadError: "the bundle's top-level code did not finish (a top-level await that never settles?)" });
  }
  try {
    const info = {
      hasDefault: 'default' in bundle,
      machine: 'none',
      definitionError: null,
      allowRead: typeof bundle.allowRead === 'function',
      allowWrite: typeof bundle.allowWrite === 'function',
      upgradeState: typeof bundle.upgradeState === 'function',
      upgradeContext: typeof bundle.upgradeContext === 'function',
    };
    const m = bundle.default;
    if (m !== null && typeof m === 'object') {
      if (isV5Machine(m)) {
        info.machine = 'v5';
        // Not machine.definition, as for v4: xstate 5 builds it with its event types as keys of a plain
        // object, which fails for ones named like Object.prototype members (its transitions, a Map, do
        // not); createMachine has checked the config already. A StateMachine's root node points back.
        // What it may still find wrong is resolved lazily per node: initial states and transitions.
        try {
          if (m.root.machine !== m) info.definitionError = 'machine.root.machine is not the machine itself';
          else checkV5Node(m.root, 0);
        } catch (e) {
          info.definitionError = errorText(e);
        }
      } else if (m.__xstatenode === true) {
        info.machine = 'v4';
        try {
          void m.definition;
        } catch (e) {
          info.definitionError = errorText(e);
        }
      }
    }
    return jsonStringify(info);
  } catch (e) {
    // e.g. a getter on the default export that throws
    return jsonStringify({ loadError: "reading the bundle's exports failed: " + errorText(e) });
  }
}

/** @returns {string} (a call from the host: version-isolate.ts) */
export function defaultContext() {
  enterCall();
  const c = v5 ? machine().config.context : machine().context;
  return jsonStringify(contextOr(jsonCopy(c)));
}

// ---- the machine's definition, for the web console's drawing ----
// Read from the state nodes (v4's StateNode, v5's StateNode: both have key, id, type, states, tags),
// not machine.definition: v5 builds that with event types as keys of a plain object (see inspect).
// Plain data only, bounded: the host hands it to a browser as is.
const DEFINITION_MAX_NODES = 1000;
const DEFINITION_MAX_TRANSITIONS = 4000;
const DEFINITION_MAX_DEPTH = 64;
const DEFINITION_MAX_CHARS = 200;
function clippedText(v) {
  const s = $String(v);
  return s.length > DEFINITION_MAX_CHARS ? s.slice(0, DEFINITION_MAX_CHARS) + '…' : s;
}
/** @returns {string} (a call from the host: version-isolate.ts) */
export function definition() {
  enterCall();
  const budget = { nodes: 0, transitions: 0, truncated: false };
  try {
    const m = machine();
    const root = describeNode(v5 ? m.root : m, 0, budget);
    return jsonStringify({ xstate: v5 ? 5 : 4, root: root, truncated: budget.truncated });
  } catch (e) {
    return jsonStringify({ error: "reading the machine's state nodes failed: " + errorText(e) });
  }
}
function targetIds(list) {
  const ids = [];
  if (list === null || list === undefined) return ids;
  for (let i = 0; i < list.length && i < 32; i++) {
    const t = list[i];
    if (t !== null && typeof t === 'object' && t.id !== undefined) arrayPush(ids, clippedText(t.id));
  }
  return ids;
}
function describeTransition(event, t, budget, out) {
  if (budget.transitions >= DEFINITION_MAX_TRANSITIONS) {
    budget.truncated = true;
    return;
  }
  budget.transitions++;
  const one = { event: clippedText(event), targets: targetIds(t.target) };
  if (t.cond || t.guard) one.guarded = true;
  arrayPush(out, one);
}
function describeNode(node, depth, budget) {
  budget.nodes++;
  const out = { key: clippedText(node.key), id: clippedText(node.id), type: clippedText(node.type), states: [], transitions: [] };
  const tags = node.tags;
  if (tags && typeof tags.length === 'number' && tags.length > 0) {
    out.tags = [];
    for (let i = 0; i < tags.length && i < 32; i++) arrayPush(out.tags, clippedText(tags[i]));
  }
  const initial = node.type === 'compound' ? node.initial : undefined;
  if (typeof initial === 'string') out.initial = clippedText(initial);
  else if (initial && initial.target && initial.target[0]) out.initial = clippedText(initial.target[0].key);
  if (v5) {
    mapForEach(node.transitions, function (list, event) {
      for (let i = 0; i < list.length; i++) describeTransition(event, list[i], budget, out.transitions);
    });
    const always = node.always;
    if (always) for (let i = 0; i < always.length; i++) describeTransition('', always[i], budget, out.transitions);
  } else {
    const list = node.transitions;
    for (let i = 0; i < list.length; i++) describeTransition(list[i].eventType, list[i], budget, out.transitions);
  }
  const children = node.states !== null && typeof node.states === 'object' ? node.states : {};
  const keys = objectKeys(children);
  for (let i = 0; i < keys.length; i++) {
    if (depth + 1 > DEFINITION_MAX_DEPTH || budget.nodes >= DEFINITION_MAX_NODES) {
      budget.truncated = true;
      break;
    }
    arrayPush(out.states, describeNode(children[keys[i]], depth + 1, budget));
  }
  return out;
}

/** @param {'read' | 'write'} kind @param {string} requestJson @returns {string} (a call from the host: version-isolate.ts) */
export function authorize(kind, requestJson) {
  enterCall();
  return authorizeRequest(kind, requestJson);
}

// allowRead for each auth context of a request, in one crossing; '1' or '0' per auth context. Each
// authorizer gets its own copy of the state and context, as it would from separate calls.
/** @param {string} requestJson @param {string} stateJson @param {string} contextJson @returns {string} (a call from the host: version-isolate.ts) */
export function authorizeReads(requestJson, stateJson, contextJson) {
  enterCall();
  const request = jsonParse(requestJson);
  let verdicts = '';
  for (const authContext of request.authContexts) {
    const one = {
      machineInstanceName: request.machineInstanceName,
      state: jsonParse(stateJson),
      context: jsonParse(contextJson),
      authContext,
    };
    verdicts += authorizeWith('read', one) === 'true' ? '1' : '0';
  }
  return verdicts;
}

function authorizeRequest(kind, requestJson) {
  return authorizeWith(kind, jsonParse(requestJson));
}
function authorizeWith(kind, request) {
  const fn = kind === 'read' ? bundle.allowRead : bundle.allowWrite;
  return internal.withLogContext(request.machineInstanceName, function () {
    try {
      return fn(request) === true ? 'true' : 'false';
    } catch (e) {
      internal.logError((kind === 'read' ? 'allowRead' : 'allowWrite') + ' threw: ' + errorText(e));
      return 'false';
    }
  });
}
