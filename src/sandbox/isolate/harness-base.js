/**
 * The harness's base (harness.js says what the harness is): the first of its modules to run, before
 * any user code. It takes the hidden plumbing (`__statehold_internal`: the host's callbacks and the
 * built-ins globals.js captured) off the global object, checks for the tampering that would reach
 * into other instances' steps (enterCall), and holds what every part of the harness shares: the
 * live actors, the actor the current call runs for, the bound bundle, and small helpers. The other
 * parts read `active`, `bundle` and `v5` as live bindings; only the setters here change them.
 */
export const internal = globalThis.__statehold_internal;
delete globalThis.__statehold_internal;
if (!internal) throw new Error('statehold harness: the globals were not installed');
/** Starts the message of the error the harness throws when machine code tampered with what it relies on (the host's TAMPERED_MARKER). */
const TAMPERED_MARKER = internal.tamperedMarker;

// ---- built-ins captured before any user code runs (globals.js intrinsics) ----
export const I = internal.intrinsics;
export const apply = I.apply,
  mapGet = I.mapGet,
  mapSet = I.mapSet,
  mapDelete = I.mapDelete,
  mapForEach = I.mapForEach;
export const arrayPush = I.arrayPush,
  objectKeys = I.objectKeys,
  hasOwn = I.hasOwn,
  $String = I.String,
  $Error = I.Error;
export const jsonStringify = I.jsonStringify,
  jsonParse = I.jsonParse;
const JSON_OBJECT = JSON;

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
export const getPrototypeOf = Object.getPrototypeOf;
const GUARDED_PARENTS = GUARDED_PROTOTYPES.map(function (p) {
  return getPrototypeOf(p);
});
export function enterCall() {
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

export const objectDefineProperty = I.objectDefineProperty,
  $WeakMap = WeakMap;

// ---- what the harness learns as it loads, and the call it runs ----
/** The live actors of this isolate's version, by actor key. */
export const actors = new I.Map();
/** The actor record the current call runs for (null between calls, and in calls for no actor). */
export let active = null;
/** The bundle's module namespace, once the entry module bound it (harness.js bind). */
export let bundle = null;
/** Whether the bundle's default export is an xstate 5 machine. */
export let v5 = false;

/** Makes `rec` the actor the current call runs for (null: none). */
export function setActive(rec) {
  active = rec;
}
/** Binds the bundle's namespace, once (harness.js bind). */
export function setBundle(ns) {
  bundle = ns;
}
/** Says whether the bound bundle's default export is an xstate 5 machine (harness.js bind). */
export function setV5(isV5) {
  v5 = isV5;
}

export function errorText(e) {
  try {
    if (e && typeof e === 'object' && 'message' in e) return $String(e.name || 'Error') + ': ' + $String(e.message);
    return 'thrown value: ' + $String(e);
  } catch (_) {
    return 'unprintable thrown value';
  }
}
export function jsonCopy(v) {
  return v === undefined ? undefined : jsonParse(jsonStringify(v));
}
/**
 * What is wrong with an object that calls itself a statebacked.instance reference but is not a whole
 * one (a name computed from an event field that is not there, say); undefined for anything else. xstate
 * would take it for a child id ("Unable to send event to child '[object Object]'").
 */
export function persistentRefProblem(to) {
  if (to === null || typeof to !== 'object' || to.type !== 'statebacked.instance' || isPersistentRef(to)) return undefined;
  return (
    'a statebacked.instance reference needs machineName and machineInstanceName as strings; this one has ' +
    typeof to.machineName +
    ' and ' +
    typeof to.machineInstanceName
  );
}

export function isPersistentRef(to) {
  return (
    to !== null &&
    typeof to === 'object' &&
    to.type === 'statebacked.instance' &&
    typeof to.machineName === 'string' &&
    typeof to.machineInstanceName === 'string'
  );
}
export function refOf(to) {
  const ref = { type: 'statebacked.instance', machineName: to.machineName, machineInstanceName: to.machineInstanceName };
  if (typeof to.id === 'string') ref.id = to.id;
  return ref;
}

export function machine() {
  return bundle.default;
}

// rec.failure is tested for truth: a falsy thrown value (undefined, null, false, 0, '') is kept as an
// Error saying what was thrown, or the step would pass as a success.
export function fail(rec, e) {
  if (!rec.failure) rec.failure = e ? e : new $Error((e === '' ? 'an empty string' : $String(e)) + ' was thrown');
}

/** A machine's default context as a context: a JSON object (anything else, an array too, counts as {}). */
export function contextOr(value) {
  return value !== null && typeof value === 'object' && !I.isArray(value) ? value : {};
}

/** Object.assign without its [[Set]]: a key named __proto__ becomes a property, not the prototype. */
export function assignOwn(target, source) {
  const keys = objectKeys(source);
  for (let i = 0; i < keys.length; i++)
    objectDefineProperty(target, keys[i], { value: source[keys[i]], writable: true, enumerable: true, configurable: true });
  return target;
}
