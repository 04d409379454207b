/**
 * The harness's httpApiMapper calls (below).
 */
import {
  internal,
  I,
  apply,
  mapGet,
  mapSet,
  mapDelete,
  objectKeys,
  hasOwn,
  $Error,
  jsonStringify,
  jsonParse,
  objectDefineProperty,
  enterCall,
  bundle,
  v5,
  setActive,
  errorText,
  jsonCopy,
  machine,
} from './harness-base.js';
import { outputOf5 } from './harness-v5.js';

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
  setActive(null);
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
  setActive(null);
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
  setActive(null);
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

/** The name a call in flight runs under, or undefined when there is no such call. */
export function httpCallName(key) {
  const call = mapGet(httpCalls, key);
  return call === undefined ? undefined : call.name;
}
