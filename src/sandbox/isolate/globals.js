/**
 * In-isolate source that installs the web-standard globals machine code may use (wire-protocol §7.3)
 * and the hidden timer/console plumbing the harness needs. It is a function expression: the host
 * runs it once per isolate with two audited callbacks and two strings, nothing else from the host:
 *   hostLog(json: string | number): void — the captured-console sink (a number: that many entries
 *                                          were dropped by the per-call budget, limits.ts)
 *   hostRandom(n: number): string        — n random bytes, hex encoded
 *   nonce                                — random, makes timer ids unique across isolates (re-armed
 *                                          timers keep their id)
 *   settingsJson                         — the limits (limits.ts) and the harness's tampering marker,
 *                                          as JSON (isolate-sources.ts IsolateSettings)
 *
 * It runs first, before any other code of the isolate: it removes `WebAssembly` (wasm memories are
 * allocated outside the V8 heap that the isolate memory limit bounds), `SharedArrayBuffer` and
 * `Atomics.wait` (a blocking wait the stall watchdog cannot see), and captures the built-ins
 * the sandbox's own code relies on (`intrinsics`, handed to the harness and the fetch installer), so
 * machine code replacing prototype methods or globals later cannot change the plumbing's behaviour.
 *
 * The callbacks are captured in this closure and never stored on a global, so machine code can only
 * reach them through console.* and crypto.*, which always pass a string/number.
 * fetch/Headers/Request/Response (fetch.js) and crypto.subtle (subtle.js) are installed
 * by their own installers, each with one audited callback of its own; TextEncoder/TextDecoder and
 * atob/btoa (encoding.js), structuredClone (structured-clone.js) and URL (url.js) by installers that
 * take nothing from the host.
 * Timers are driven by the host clock: nothing fires by itself; the harness fires due timers when the
 * host calls advance(key, now). Delays: NaN, negative or non-numeric → 0; +Infinity → never fires
 * (nothing is scheduled; the id is still valid for clearTimeout). Timers are bounded per owner.
 * The plumbing object is parked on a global for the harness module to take (and delete) before any
 * user code runs.
 */
(function installGlobals(
  /** @type {(entry: string | number) => void} */ hostLog,
  /** @type {(n: number) => string} */ hostRandom,
  /** @type {string} */ nonce,
  /** @type {string} */ settingsJson,
) {
  'use strict';
  var G = globalThis;
  /** @type {import('./isolate-settings').IsolateSettings} */
  var settings = JSON.parse(settingsJson);
  // WebAssembly.Memory backing stores live outside the V8 heap, so isolated-vm's memoryLimit does not
  // bound them: the whole namespace goes before any other code runs (nothing else references it).
  delete G.WebAssembly;
  // Atomics.wait sleeps holding the worker's thread without using CPU, so the stall watchdog (CPU time)
  // never moves the caller aside while every other org's calls wait behind it; it needs a
  // SharedArrayBuffer, which nothing else here wants. The other Atomics operations never block.
  delete G.SharedArrayBuffer;
  delete G.Atomics.wait;

  // ---- intrinsics, captured before any user code runs (uncurried: no lookup when called) ----
  var uncurry = Function.prototype.bind.bind(Function.prototype.call);
  var intrinsics = Object.freeze({
    apply: Reflect.apply,
    mapGet: uncurry(Map.prototype.get),
    mapSet: uncurry(Map.prototype.set),
    mapHas: uncurry(Map.prototype.has),
    mapDelete: uncurry(Map.prototype.delete),
    mapForEach: uncurry(Map.prototype.forEach),
    mapSize: uncurry(Object.getOwnPropertyDescriptor(Map.prototype, 'size').get),
    setForEach: uncurry(Set.prototype.forEach),
    weakMapGet: uncurry(WeakMap.prototype.get),
    weakMapSet: uncurry(WeakMap.prototype.set),
    arrayPush: uncurry(Array.prototype.push),
    arrayPop: uncurry(Array.prototype.pop),
    arraySlice: uncurry(Array.prototype.slice),
    arraySort: uncurry(Array.prototype.sort),
    arrayMap: uncurry(Array.prototype.map),
    arrayIndexOf: uncurry(Array.prototype.indexOf),
    arrayJoin: uncurry(Array.prototype.join),
    isArray: Array.isArray,
    stringSlice: uncurry(String.prototype.slice),
    stringSplit: uncurry(String.prototype.split),
    objectKeys: Object.keys,
    objectAssign: Object.assign,
    objectDefineProperty: Object.defineProperty,
    objectFreeze: Object.freeze,
    getOwnPropertyDescriptor: Object.getOwnPropertyDescriptor,
    hasOwn: uncurry(Object.prototype.hasOwnProperty),
    objectToString: uncurry(Object.prototype.toString),
    jsonStringify: JSON.stringify,
    jsonParse: JSON.parse,
    String: String,
    Number: Number,
    Error: Error,
    TypeError: TypeError,
    Map: Map,
    isFinite: Number.isFinite,
    mathMax: Math.max,
    mathMin: Math.min,
    parseInt: parseInt,
  });
  var I = intrinsics;
  var $Error = Error,
    $TypeError = TypeError;

  function define(name, value) {
    Object.defineProperty(G, name, { value: value, writable: true, configurable: true, enumerable: false });
  }

  // ---- execution context: which actor the code currently runs for (set by the harness) ----
  var current = null; // { key, name, now }
  var versionLogContext = null; // { machineInstanceName } during authorizer calls

  // ---- timers (host clock) ----
  var timers = new I.Map(); // id -> { id, owner, dueAt, fn, args, interval, meta }
  // owner -> { all, events, byId: Map(id -> timer) }: each owner's pending timers, counted for the
  // limits (limits.ts) and kept apart so that one actor's are found without walking every live actor's
  var timerCounts = new I.Map();
  var timerSeq = 0;
  var MAX_TIMERS_PER_OWNER = settings.maxTimersPerOwner;
  var MAX_EVENT_TIMERS_PER_OWNER = settings.maxEventTimersPerOwner;
  function nowMs() {
    return current ? current.now : Date.now();
  }
  function countOf(owner) {
    var c = I.mapGet(timerCounts, owner);
    if (c === undefined) {
      c = { all: 0, events: 0, byId: new I.Map() };
      I.mapSet(timerCounts, owner, c);
    }
    return c;
  }
  function removeTimer(id) {
    var t = I.mapGet(timers, id);
    if (t === undefined) return;
    I.mapDelete(timers, id);
    var c = I.mapGet(timerCounts, t.owner);
    if (c === undefined) return;
    c.all--;
    if (t.meta) c.events--;
    I.mapDelete(c.byId, id);
    if (c.all <= 0) I.mapDelete(timerCounts, t.owner);
  }
  /**
   * Delays: NaN, negative, -Infinity or non-numeric → 0 (as web timers); +Infinity → never due, so
   * nothing is scheduled (xstate's after: { Infinity } never fires; the id can still be cleared).
   * A re-armed timer's persisted due time is used when finite.
   */
  function addTimer(owner, fn, delay, args, interval, meta, fixedId, fixedDueAt) {
    var n = ++timerSeq;
    var id = fixedId || nonce + ':' + n;
    var ms = I.Number(delay);
    if (ms === Infinity) return id;
    if (!I.isFinite(ms) || ms < 0) ms = 0;
    var dueAt;
    if (typeof fixedDueAt === 'number' && fixedDueAt === Infinity) return id;
    else if (typeof fixedDueAt === 'number' && I.isFinite(fixedDueAt)) dueAt = fixedDueAt;
    else dueAt = nowMs() + ms;
    if (!I.isFinite(dueAt)) return id;
    removeTimer(id);
    var c = countOf(owner);
    if (c.all >= MAX_TIMERS_PER_OWNER) throw new $Error('too many pending timers (at most ' + MAX_TIMERS_PER_OWNER + ' per actor)');
    if (meta && c.events >= MAX_EVENT_TIMERS_PER_OWNER) {
      throw new $Error('too many pending delayed events (at most ' + MAX_EVENT_TIMERS_PER_OWNER + ' per actor)');
    }
    c.all++;
    if (meta) c.events++;
    var timer = {
      id: id,
      n: n,
      owner: owner,
      fn: fn,
      args: args || [],
      interval: interval ? I.mathMax(ms, 1) : 0,
      dueAt: dueAt,
      meta: meta || null,
    };
    I.mapSet(timers, id, timer);
    I.mapSet(c.byId, id, timer);
    return id;
  }
  function webTimerId(id) {
    return I.Number(I.stringSplit(I.String(id), ':')[1]);
  }
  function fromWebTimerId(n) {
    return nonce + ':' + n;
  }
  function setTimeoutImpl(fn, delay) {
    if (typeof fn !== 'function') throw new $TypeError('setTimeout: callback must be a function');
    var args = I.arraySlice(arguments, 2);
    return webTimerId(addTimer(current ? current.key : null, fn, delay, args, false, null));
  }
  function setIntervalImpl(fn, delay) {
    if (typeof fn !== 'function') throw new $TypeError('setInterval: callback must be a function');
    var args = I.arraySlice(arguments, 2);
    return webTimerId(addTimer(current ? current.key : null, fn, delay, args, true, null));
  }
  function clearTimerImpl(n) {
    if (n !== undefined && n !== null) removeTimer(fromWebTimerId(n));
  }
  define('setTimeout', setTimeoutImpl);
  define('setInterval', setIntervalImpl);
  define('clearTimeout', clearTimerImpl);
  define('clearInterval', clearTimerImpl);
  define('queueMicrotask', function queueMicrotask(fn) {
    if (typeof fn !== 'function') throw new TypeError('queueMicrotask: callback must be a function');
    Promise.resolve().then(function () {
      fn();
    });
  });

  // ---- console capture ----
  function logSafe(value, depth, seen) {
    switch (typeof value) {
      case 'string':
      case 'boolean':
        return value;
      case 'number':
        return I.isFinite(value) ? value : I.String(value);
      case 'bigint':
        return value.toString() + 'n';
      case 'undefined':
        return null;
      case 'symbol':
        return value.toString();
      case 'function':
        return '[Function ' + (value.name || 'anonymous') + ']';
    }
    if (value === null) return null;
    if (I.arrayIndexOf(seen, value) >= 0) return '[Circular]';
    if (depth > 8) return '[Object]';
    I.arrayPush(seen, value);
    try {
      if (value instanceof Error) {
        return { name: String(value.name), message: String(value.message), stack: String(value.stack || '') };
      }
      if (value instanceof Date) return isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
      if (I.isArray(value))
        return I.arrayMap(I.arraySlice(value, 0, 1000), function (v) {
          return logSafe(v, depth + 1, seen);
        });
      if (value instanceof Map) {
        var m = {};
        value.forEach(function (v, k) {
          m[String(k)] = logSafe(v, depth + 1, seen);
        });
        return m;
      }
      if (value instanceof Set) {
        var s = [];
        value.forEach(function (v) {
          s.push(logSafe(v, depth + 1, seen));
        });
        return s;
      }
      var out = {};
      var keys = I.arraySlice(I.objectKeys(value), 0, 1000);
      for (var i = 0; i < keys.length; i++) {
        var item;
        try {
          item = logSafe(value[keys[i]], depth + 1, seen);
        } catch (e) {
          item = '[Unserialisable]';
        }
        out[keys[i]] = item;
      }
      return out;
    } catch (e) {
      return '[Unserialisable]';
    } finally {
      I.arrayPop(seen);
    }
  }
  var MAX_LOG_CHARS = settings.maxLogEntryChars;
  // per-call budget (limits.ts): reset by beginCall, which the harness calls at each of its entries.
  // Once over, the rest of the call's entries are dropped without being serialised or sent: the
  // first drop of a call is signalled to the host (hostLog(1)), which asks for the count when its
  // call returns (takeDroppedLogs) and writes one summary entry.
  var MAX_LOG_ENTRIES_PER_CALL = settings.maxLogEntriesPerCall;
  var MAX_LOG_CHARS_PER_CALL = settings.maxLogCharsPerCall;
  var logEntries = 0,
    logChars = 0,
    logTruncated = false,
    logDropped = 0;
  function beginCall() {
    logEntries = 0;
    logChars = 0;
    logTruncated = false;
  }
  function dropEntry() {
    logDropped++;
    if (!logTruncated) {
      logTruncated = true;
      hostLog(1);
    }
  }
  function takeDropped() {
    var n = logDropped;
    logDropped = 0;
    return n;
  }
  function emit(level, argsLike) {
    if (logTruncated || logEntries >= MAX_LOG_ENTRIES_PER_CALL) {
      dropEntry();
      return;
    }
    var args = [];
    for (var i = 0; i < argsLike.length; i++) I.arrayPush(args, logSafe(argsLike[i], 0, []));
    var entry = { level: level, args: args };
    if (current) {
      entry.instanceKey = current.key;
      if (current.name) entry.machineInstanceName = current.name;
    } else if (versionLogContext) entry.machineInstanceName = versionLogContext.machineInstanceName;
    var json;
    try {
      json = I.jsonStringify(entry);
    } catch (e) {
      json = undefined;
    }
    if (typeof json !== 'string') json = I.jsonStringify({ level: level, args: ['[Unserialisable log entry]'] });
    if (json.length > MAX_LOG_CHARS) {
      // escaping can double the sliced text once it is a JSON string itself: retry with half
      entry.args = [I.stringSlice(json, 0, MAX_LOG_CHARS - 64) + '...[truncated]'];
      json = I.jsonStringify(entry);
      if (json.length > MAX_LOG_CHARS) {
        entry.args = [I.stringSlice(entry.args[0], 0, (MAX_LOG_CHARS >> 1) - 64) + '...[truncated]'];
        json = I.jsonStringify(entry);
      }
    }
    if (logChars + json.length > MAX_LOG_CHARS_PER_CALL) {
      dropEntry();
      return;
    }
    logEntries++;
    logChars += json.length;
    hostLog(json);
  }
  var consoleObject = {};
  ['log', 'info', 'warn', 'error', 'debug'].forEach(function (level) {
    consoleObject[level] = function () {
      emit(level, arguments);
    };
  });
  consoleObject.trace = consoleObject.debug;
  define('console', consoleObject);

  // ---- randomness (host fed, pooled) ----
  var pool = [];
  function randomByte() {
    if (pool.length === 0) {
      var hex = I.String(hostRandom(256));
      for (var i = 0; i + 1 < hex.length; i += 2) I.arrayPush(pool, I.parseInt(I.stringSlice(hex, i, i + 2), 16));
    }
    return I.arrayPop(pool);
  }
  var INTEGER_ARRAYS = [
    'Int8Array',
    'Uint8Array',
    'Uint8ClampedArray',
    'Int16Array',
    'Uint16Array',
    'Int32Array',
    'Uint32Array',
    'BigInt64Array',
    'BigUint64Array',
  ];
  function getRandomValues(array) {
    var tag = I.stringSlice(I.objectToString(array), 8, -1);
    if (I.arrayIndexOf(INTEGER_ARRAYS, tag) < 0) throw new $TypeError('getRandomValues: argument must be an integer typed array');
    if (array.byteLength > 65536) throw new RangeError('getRandomValues: at most 65536 bytes');
    var bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (var i = 0; i < bytes.length; i++) bytes[i] = randomByte();
    return array;
  }
  var HEX = '0123456789abcdef';
  function randomUUID() {
    var out = '';
    for (var i = 0; i < 16; i++) {
      var v = randomByte();
      if (i === 6) v = (v & 0x0f) | 0x40;
      if (i === 8) v = (v & 0x3f) | 0x80;
      if (i === 4 || i === 6 || i === 8 || i === 10) out += '-';
      out += HEX[v >> 4] + HEX[v & 15];
    }
    return out;
  }
  define('crypto', { getRandomValues: getRandomValues, randomUUID: randomUUID });

  // ---- AbortController / AbortSignal (xstate 5 hands a signal to every fromPromise actor) ----
  // The state of a signal is kept here, not on it, so machine code cannot abort one without its controller.
  var signalStates = new WeakMap();
  function abortError(name, message) {
    var e = new Error(message);
    e.name = name;
    return e;
  }
  function AbortSignal() {
    throw new TypeError('Illegal constructor');
  }
  function newSignal() {
    var s = Object.create(AbortSignal.prototype);
    signalStates.set(s, { aborted: false, reason: undefined, listeners: [] });
    s.onabort = null;
    return s;
  }
  function stateOfSignal(s) {
    var st = signalStates.get(s);
    if (st === undefined) throw new TypeError('not an AbortSignal');
    return st;
  }
  function abortSignal(s, reason) {
    var st = stateOfSignal(s);
    if (st.aborted) return;
    st.aborted = true;
    st.reason = reason === undefined ? abortError('AbortError', 'This operation was aborted') : reason;
    var event = { type: 'abort', target: s, currentTarget: s };
    var listeners = st.listeners;
    st.listeners = [];
    if (typeof s.onabort === 'function') {
      try {
        s.onabort(event);
      } catch (e) {
        emit('error', ['uncaught exception in an abort listener: ' + String(e && e.message)]);
      }
    }
    for (var i = 0; i < listeners.length; i++) {
      try {
        listeners[i].call(s, event);
      } catch (e) {
        emit('error', ['uncaught exception in an abort listener: ' + String(e && e.message)]);
      }
    }
  }
  Object.defineProperty(AbortSignal.prototype, 'aborted', {
    get: function () {
      return stateOfSignal(this).aborted;
    },
  });
  Object.defineProperty(AbortSignal.prototype, 'reason', {
    get: function () {
      return stateOfSignal(this).reason;
    },
  });
  AbortSignal.prototype.throwIfAborted = function () {
    var st = stateOfSignal(this);
    if (st.aborted) throw st.reason;
  };
  AbortSignal.prototype.addEventListener = function (type, listener) {
    var st = stateOfSignal(this);
    if (type !== 'abort' || typeof listener !== 'function' || st.aborted) return;
    if (st.listeners.indexOf(listener) < 0) st.listeners.push(listener);
  };
  AbortSignal.prototype.removeEventListener = function (type, listener) {
    var st = stateOfSignal(this);
    var i = st.listeners.indexOf(listener);
    if (type === 'abort' && i >= 0) st.listeners.splice(i, 1);
  };
  AbortSignal.abort = function (reason) {
    var s = newSignal();
    abortSignal(s, reason);
    return s;
  };
  AbortSignal.timeout = function (ms) {
    var s = newSignal();
    setTimeoutImpl(function () {
      abortSignal(s, abortError('TimeoutError', 'The operation timed out'));
    }, ms);
    return s;
  };
  function AbortController() {
    if (!(this instanceof AbortController)) throw new TypeError("Class constructor AbortController cannot be invoked without 'new'");
    Object.defineProperty(this, 'signal', { value: newSignal(), enumerable: true });
  }
  AbortController.prototype.abort = function (reason) {
    abortSignal(/** @type {any} */ (this).signal, reason);
  };
  define('AbortSignal', AbortSignal);
  define('AbortController', AbortController);

  // ---- plumbing for the harness (taken and deleted by the harness module before user code runs) ----
  var internal = {
    intrinsics: intrinsics,
    /** Starts the message of the error the harness throws when machine code tampered with what it relies on. */
    tamperedMarker: settings.tamperedMarker,
    randomUUID: randomUUID,
    /** Starts a new call into the isolate: the per-call console budget begins afresh. */
    beginCall: beginCall,
    /** Console entries dropped since the host last asked (the host's summary counts them). */
    takeDropped: takeDropped,
    enter: function (key, name, now) {
      current = { key: key, name: name, now: now };
    },
    leave: function () {
      current = null;
    },
    /** The actor key the code currently runs for (host calls are attributed to it), or null. */
    currentKey: function () {
      return current ? current.key : null;
    },
    /** After a CPU-time limit fired (finally blocks do not run then), forget any call context. */
    reset: function () {
      current = null;
      versionLogContext = null;
    },
    setNow: function (now) {
      if (current) current.now = now;
    },
    withLogContext: function (machineInstanceName, fn) {
      versionLogContext = { machineInstanceName: machineInstanceName };
      try {
        return fn();
      } finally {
        versionLogContext = null;
      }
    },
    logError: function () {
      emit('error', arguments);
    },
    addTimer: function (owner, fn, delay, meta) {
      return addTimer(owner, fn, delay, [], false, meta);
    },
    rearmTimer: function (owner, fn, id, dueAt, meta) {
      return addTimer(owner, fn, 0, [], false, meta, id, dueAt);
    },
    clearTimer: function (id) {
      removeTimer(id);
    },
    clearOwner: function (owner, kind) {
      var c = I.mapGet(timerCounts, owner);
      if (c === undefined) return;
      var ids = [];
      I.mapForEach(c.byId, function (t, id) {
        if (!kind || (t.meta ? 'event' : 'callback') === kind) I.arrayPush(ids, id);
      });
      for (var i = 0; i < ids.length; i++) removeTimer(ids[i]);
    },
    timersOf: function (owner) {
      var list = [];
      var c = I.mapGet(timerCounts, owner);
      if (c !== undefined)
        I.mapForEach(c.byId, function (t) {
          I.arrayPush(list, t);
        });
      I.arraySort(list, function (a, b) {
        return a.dueAt - b.dueAt || a.n - b.n;
      });
      return I.arrayMap(list, function (t) {
        if (!t.meta) return { kind: 'callback', id: t.id, dueAt: t.dueAt };
        var e = { kind: 'event', id: t.id, dueAt: t.dueAt, event: t.meta.event };
        if (t.meta.sendId !== undefined) e.sendId = t.meta.sendId;
        if (t.meta.to !== undefined) e.to = t.meta.to;
        return e;
      });
    },
    /** Fires the owner's timers due at 'now', earliest first, including ones they schedule. */
    fireDue: function (owner, now, onError) {
      for (var guard = 0; guard < 10000; guard++) {
        /** @type {any} */
        var next = null;
        var c = I.mapGet(timerCounts, owner);
        if (c !== undefined)
          I.mapForEach(c.byId, function (t) {
            if (t.dueAt <= now && (!next || t.dueAt < next.dueAt || (t.dueAt === next.dueAt && t.n < next.n))) next = t;
          });
        if (!next) return;
        var firedAt = next.dueAt;
        if (next.interval) next.dueAt += next.interval;
        else removeTimer(next.id);
        // timers scheduled by this callback count from its due time, so a late advance catches up
        // on a chain of delays exactly as a punctual clock would have
        if (current) current.now = firedAt;
        try {
          I.apply(next.fn, undefined, next.args);
        } catch (e) {
          if (onError(e, next) === false) break;
        }
      }
      if (current) current.now = now;
    },
  };
  define('__statehold_internal', internal);
});
