/**
 * The in-isolate harness: ES modules evaluated once per isolate, after the globals and BEFORE the
 * user bundle (so it can take the hidden plumbing object before user code can see it), and bound to
 * the bundle's namespace afterwards by a tiny entry module. This module is what the host calls; its
 * parts, which only the harness's own modules can import (module-loader.ts):
 * - harness-base.js: takes the plumbing, the tampering checks, the live actors and the call's actor;
 * - harness-v4.js: xstate 4 interpreters; harness-pure-steps.js: v4 actors resting without one;
 * - harness-v5.js: xstate 5 actors;
 * - harness-http-api.js: httpApiMapper calls; harness-version-info.js: what a version exports, its
 *   default context and its state nodes; harness-upgrades.js: an instance's upgrade to another version.
 * The host calls this module's exports through references obtained once (applySync, ≈ 1.6 µs a crossing); every argument and result is a string
 * or a number, so no object crosses the boundary (the one exception: `deliver` also receives a
 * host-made ArrayBuffer copy of a fetch response body).
 *
 * Live actors of v4 machines are xstate v4 interpreters of the shared xstate copy (also for bundles
 * that carry their own xstate: that copy's `spawn` cannot see our interpreter, which is why State
 * Backed tells users to use spawnEphemeralInstance → __statebacked_rt.spawn, installed here). Live
 * actors of v5 machines are Actors of the shared xstate 5 copy (harness-v5.js).
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
import { provide } from 'xstate/lib/serviceScope';
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
  $Error,
  jsonStringify,
  jsonParse,
  getPrototypeOf,
  objectDefineProperty,
  enterCall,
  actors,
  active,
  bundle,
  v5,
  setActive,
  setBundle,
  setV5,
  errorText,
  jsonCopy,
  machine,
  fail,
  contextOr,
  assignOwn,
} from './harness-base.js';
import {
  P,
  X_spawn,
  protectEventLookups,
  freeSessionsOf,
  createInterpreter,
  rearm,
  rearmToSelf,
  restingDelayed,
  snapshotOf,
} from './harness-v4.js';
import {
  P5,
  isV5Machine,
  machine5,
  createActor5,
  checkFailed5,
  restoreNodeOrder5,
  rearm5,
  sendEvent5,
  runningChildren5,
  stopChildren5,
  snapshotOf5,
} from './harness-v5.js';
import {
  spawnGuard,
  pureMachine,
  pureSend,
  pureStart,
  keepValueOrder,
  restingState,
  restIfIdle,
  disablePureSteps,
  forgetPureCall,
} from './harness-pure-steps.js';
import { httpCallName } from './harness-http-api.js';
import { upgradedState4, upgradedState5, keepPersistentInvokes5, timersForMajor } from './harness-upgrades.js';

export { bindV5 } from './harness-v5.js';
export { httpCall, httpCollect, httpDrop } from './harness-http-api.js';
export { inspect, defaultContext, definition } from './harness-version-info.js';
export { migrate, rememberedPaths5 } from './harness-upgrades.js';

export function bind(ns) {
  if (bundle !== null) throw new Error('statehold harness: already bound');
  setBundle(ns);
  try {
    const m = ns.default;
    setV5(isV5Machine(m));
    if (!v5 && m !== null && typeof m === 'object' && m.__xstatenode === true) protectEventLookups(getPrototypeOf(m));
  } catch (_) {
    /* inspect() reports an unreadable default export */
  }
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

function startActor5(rec, init) {
  const m = machine5();
  if (init.snapshot) {
    // A snapshot an upgrade made (harness-upgrades.js): rebuilt for this version's machine.
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

function discard(rec) {
  if (mapGet(actors, rec.key) === rec) mapDelete(actors, rec.key);
  if (active === rec) setActive(null);
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

function enter(rec, now) {
  setActive(rec);
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
      // A snapshot an upgrade made (harness-upgrades.js): rebuilt for this version's machine.
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
    setActive(null);
    internal.leave();
  }
  return jsonStringify(ids);
}

/** @param {string} key @returns {string} (a call from the host: version-isolate.ts) */
export function stop(key) {
  internal.beginCall();
  setActive(null);
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
  setActive(null);
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
    const callName = rec ? undefined : httpCallName(owner);
    if (rec) enter(rec, now);
    else if (callName !== undefined) {
      setActive(null);
      internal.enter(owner, callName, now);
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
  setActive(null);
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
  if (settings.pureSteps === false) disablePureSteps();
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
  setActive(null);
  forgetPureCall();
  internal.reset();
  return '';
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
