/**
 * In-isolate source that installs the web-standard globals machine code may use (wire-protocol §7.3)
 * and the hidden timer/console plumbing the harness needs. It is a function expression: the host
 * runs it once per isolate with three audited callbacks and nothing else from the host:
 *   hostLog(json: string): void          — the captured-console sink
 *   hostRandom(n: number): string        — n random bytes, hex encoded
 * plus a random nonce that makes timer ids unique across isolates (re-armed timers keep their id).
 *
 * The callbacks are captured in this closure and never stored on a global, so machine code can only
 * reach them through console.* and crypto.*, which always pass a string/number.
 * fetch/Headers/Request/Response (fetch-source.ts) and crypto.subtle (subtle-source.ts) are installed
 * by their own installers, each with one audited callback of its own.
 * Timers are driven by the host clock: nothing fires by itself; the harness fires due timers when the
 * host calls advance(key, now). The plumbing object is parked on a global for the harness module to
 * take (and delete) before any user code runs.
 */
export const GLOBALS_SOURCE = String.raw`(function installGlobals(hostLog, hostRandom, nonce) {
  'use strict';
  var G = globalThis;
  function define(name, value) {
    Object.defineProperty(G, name, { value: value, writable: true, configurable: true, enumerable: false });
  }

  // ---- execution context: which actor the code currently runs for (set by the harness) ----
  var current = null; // { key, name, now }
  var versionLogContext = null; // { machineInstanceName } during authorizer calls

  // ---- timers (host clock) ----
  var timers = new Map(); // id -> { id, owner, dueAt, fn, args, interval, meta }
  var timerSeq = 0;
  var MAX_TIMERS = 100000;
  function nowMs() { return current ? current.now : Date.now(); }
  function addTimer(owner, fn, delay, args, interval, meta, fixedId, fixedDueAt) {
    if (timers.size >= MAX_TIMERS) throw new Error('too many pending timers');
    var n = ++timerSeq;
    var id = fixedId || (nonce + ':' + n);
    var ms = Number(delay);
    if (!(ms > 0)) ms = 0;
    timers.set(id, {
      id: id, n: n, owner: owner, fn: fn, args: args || [], interval: interval ? Math.max(ms, 1) : 0,
      dueAt: typeof fixedDueAt === 'number' ? fixedDueAt : nowMs() + ms, meta: meta || null
    });
    return id;
  }
  function webTimerId(id) { return Number(String(id).split(':')[1]); }
  function fromWebTimerId(n) { return nonce + ':' + n; }
  function setTimeoutImpl(fn, delay) {
    if (typeof fn !== 'function') throw new TypeError('setTimeout: callback must be a function');
    var args = Array.prototype.slice.call(arguments, 2);
    return webTimerId(addTimer(current ? current.key : null, fn, delay, args, false, null));
  }
  function setIntervalImpl(fn, delay) {
    if (typeof fn !== 'function') throw new TypeError('setInterval: callback must be a function');
    var args = Array.prototype.slice.call(arguments, 2);
    return webTimerId(addTimer(current ? current.key : null, fn, delay, args, true, null));
  }
  function clearTimerImpl(n) { if (n !== undefined && n !== null) timers.delete(fromWebTimerId(n)); }
  define('setTimeout', setTimeoutImpl);
  define('setInterval', setIntervalImpl);
  define('clearTimeout', clearTimerImpl);
  define('clearInterval', clearTimerImpl);
  define('queueMicrotask', function queueMicrotask(fn) {
    if (typeof fn !== 'function') throw new TypeError('queueMicrotask: callback must be a function');
    Promise.resolve().then(function () { fn(); });
  });

  // ---- console capture ----
  function logSafe(value, depth, seen) {
    switch (typeof value) {
      case 'string': case 'boolean': return value;
      case 'number': return isFinite(value) ? value : String(value);
      case 'bigint': return value.toString() + 'n';
      case 'undefined': return null;
      case 'symbol': return value.toString();
      case 'function': return '[Function ' + (value.name || 'anonymous') + ']';
    }
    if (value === null) return null;
    if (seen.indexOf(value) >= 0) return '[Circular]';
    if (depth > 8) return '[Object]';
    seen.push(value);
    try {
      if (value instanceof Error) {
        return { name: String(value.name), message: String(value.message), stack: String(value.stack || '') };
      }
      if (value instanceof Date) return isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
      if (Array.isArray(value)) return value.slice(0, 1000).map(function (v) { return logSafe(v, depth + 1, seen); });
      if (value instanceof Map) {
        var m = {};
        value.forEach(function (v, k) { m[String(k)] = logSafe(v, depth + 1, seen); });
        return m;
      }
      if (value instanceof Set) {
        var s = [];
        value.forEach(function (v) { s.push(logSafe(v, depth + 1, seen)); });
        return s;
      }
      var out = {};
      var keys = Object.keys(value).slice(0, 1000);
      for (var i = 0; i < keys.length; i++) {
        var item;
        try { item = logSafe(value[keys[i]], depth + 1, seen); } catch (e) { item = '[Unserialisable]'; }
        out[keys[i]] = item;
      }
      return out;
    } catch (e) {
      return '[Unserialisable]';
    } finally {
      seen.pop();
    }
  }
  var MAX_LOG_CHARS = 64 * 1024;
  function emit(level, argsLike) {
    var args = [];
    for (var i = 0; i < argsLike.length; i++) args.push(logSafe(argsLike[i], 0, []));
    var entry = { level: level, args: args };
    if (current) { entry.instanceKey = current.key; if (current.name) entry.machineInstanceName = current.name; }
    else if (versionLogContext) entry.machineInstanceName = versionLogContext.machineInstanceName;
    var json;
    try { json = JSON.stringify(entry); } catch (e) { json = JSON.stringify({ level: level, args: ['[Unserialisable log entry]'] }); }
    if (json.length > MAX_LOG_CHARS) {
      entry.args = [json.slice(0, MAX_LOG_CHARS) + '...[truncated]'];
      json = JSON.stringify(entry);
    }
    hostLog(json);
  }
  var consoleObject = {};
  ['log', 'info', 'warn', 'error', 'debug'].forEach(function (level) {
    consoleObject[level] = function () { emit(level, arguments); };
  });
  consoleObject.trace = consoleObject.debug;
  define('console', consoleObject);

  // ---- randomness (host fed, pooled) ----
  var pool = [];
  function randomByte() {
    if (pool.length === 0) {
      var hex = String(hostRandom(256));
      for (var i = 0; i + 1 < hex.length; i += 2) pool.push(parseInt(hex.slice(i, i + 2), 16));
    }
    return pool.pop();
  }
  var INTEGER_ARRAYS = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
    'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array'];
  function getRandomValues(array) {
    var tag = Object.prototype.toString.call(array).slice(8, -1);
    if (INTEGER_ARRAYS.indexOf(tag) < 0) throw new TypeError('getRandomValues: argument must be an integer typed array');
    if (array.byteLength > 65536) throw new RangeError('getRandomValues: at most 65536 bytes');
    var bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (var i = 0; i < bytes.length; i++) bytes[i] = randomByte();
    return array;
  }
  function randomUUID() {
    var b = getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = [];
    for (var i = 0; i < 16; i++) h.push((b[i] + 0x100).toString(16).slice(1));
    return h.slice(0, 4).join('') + '-' + h.slice(4, 6).join('') + '-' + h.slice(6, 8).join('') + '-' +
      h.slice(8, 10).join('') + '-' + h.slice(10, 16).join('');
  }
  define('crypto', { getRandomValues: getRandomValues, randomUUID: randomUUID });

  // ---- TextEncoder / TextDecoder (UTF-8 only) ----
  function TextEncoder() {}
  Object.defineProperty(TextEncoder.prototype, 'encoding', { get: function () { return 'utf-8'; } });
  TextEncoder.prototype.encode = function (input) {
    var str = input === undefined ? '' : String(input);
    var out = [];
    for (var i = 0; i < str.length; i++) {
      var c = str.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
        var d = str.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
        else c = 0xfffd;
      } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      if (c < 0x80) out.push(c);
      else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return new Uint8Array(out);
  };
  TextEncoder.prototype.encodeInto = function (input, dest) {
    var bytes = this.encode(input);
    var n = Math.min(bytes.length, dest.length);
    // do not split a multi-byte sequence
    while (n > 0 && n < bytes.length && (bytes[n] & 0xc0) === 0x80) n--;
    dest.set(bytes.subarray(0, n));
    var read = new TextDecoder().decode(bytes.subarray(0, n)).length;
    return { read: read, written: n };
  };
  function TextDecoder(label, options) {
    var l = label === undefined ? 'utf-8' : String(label).trim().toLowerCase();
    if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8') throw new RangeError('TextDecoder: only utf-8 is supported');
    this.fatal = !!(options && options.fatal);
    this.ignoreBOM = !!(options && options.ignoreBOM);
  }
  Object.defineProperty(TextDecoder.prototype, 'encoding', { get: function () { return 'utf-8'; } });
  TextDecoder.prototype.decode = function (input) {
    if (input === undefined) return '';
    var bytes = input instanceof ArrayBuffer ? new Uint8Array(input)
      : ArrayBuffer.isView(input) ? new Uint8Array(input.buffer, input.byteOffset, input.byteLength) : null;
    if (!bytes) throw new TypeError('TextDecoder.decode: expected an ArrayBuffer or a view');
    var fatal = this.fatal;
    var out = '';
    var chunk = [];
    function bad() { if (fatal) throw new TypeError('The encoded data was not valid utf-8'); return 0xfffd; }
    var i = 0;
    if (!this.ignoreBOM && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) i = 3;
    for (; i < bytes.length;) {
      var b = bytes[i];
      var cp, need = 0, min = 0;
      if (b < 0x80) { cp = b; }
      else if (b >= 0xc2 && b <= 0xdf) { cp = b & 0x1f; need = 1; min = 0x80; }
      else if (b >= 0xe0 && b <= 0xef) { cp = b & 0x0f; need = 2; min = 0x800; }
      else if (b >= 0xf0 && b <= 0xf4) { cp = b & 0x07; need = 3; min = 0x10000; }
      else { cp = bad(); }
      i++;
      if (need) {
        var k = 0;
        while (k < need && i < bytes.length && (bytes[i] & 0xc0) === 0x80) { cp = (cp << 6) | (bytes[i] & 0x3f); i++; k++; }
        if (k < need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) cp = bad();
      }
      if (cp > 0xffff) { cp -= 0x10000; chunk.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff)); }
      else chunk.push(cp);
      if (chunk.length > 8192) { out += String.fromCharCode.apply(null, chunk); chunk = []; }
    }
    return out + String.fromCharCode.apply(null, chunk);
  };
  define('TextEncoder', TextEncoder);
  define('TextDecoder', TextDecoder);

  // ---- atob / btoa ----
  var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function invalidChar(msg) { var e = new Error(msg); e.name = 'InvalidCharacterError'; return e; }
  define('btoa', function btoa(input) {
    var s = String(input), out = '';
    for (var i = 0; i < s.length; i++) if (s.charCodeAt(i) > 255) throw invalidChar('btoa: the string contains characters outside of the Latin1 range');
    for (var j = 0; j < s.length; j += 3) {
      var a = s.charCodeAt(j), b = s.charCodeAt(j + 1), c = s.charCodeAt(j + 2);
      var n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (j + 1 < s.length ? B64[(n >> 6) & 63] : '=') + (j + 2 < s.length ? B64[n & 63] : '=');
    }
    return out;
  });
  define('atob', function atob(input) {
    var s = String(input).replace(/[\t\n\f\r ]/g, '');
    if (s.length % 4 === 0) s = s.replace(/==?$/, '');
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) throw invalidChar('atob: the string to be decoded is not correctly encoded');
    var out = '', bits = 0, acc = 0;
    for (var i = 0; i < s.length; i++) {
      acc = (acc << 6) | B64.indexOf(s[i]); bits += 6;
      if (bits >= 8) { bits -= 8; out += String.fromCharCode((acc >> bits) & 255); }
    }
    return out;
  });

  // ---- structuredClone (JSON-like values, Map, Set, Date, RegExp, ArrayBuffer, typed arrays, Error) ----
  function cloneError(msg) { var e = new Error(msg); e.name = 'DataCloneError'; return e; }
  function clone(v, memo) {
    if (v === null || (typeof v !== 'object' && typeof v !== 'function')) {
      if (typeof v === 'symbol') throw cloneError('Symbol could not be cloned');
      return v;
    }
    if (typeof v === 'function') throw cloneError('function could not be cloned');
    if (memo.has(v)) return memo.get(v);
    var out;
    if (Array.isArray(v)) { out = []; memo.set(v, out); for (var i = 0; i < v.length; i++) out[i] = clone(v[i], memo); return out; }
    if (v instanceof Date) { out = new Date(v.getTime()); memo.set(v, out); return out; }
    if (v instanceof RegExp) { out = new RegExp(v.source, v.flags); memo.set(v, out); return out; }
    if (v instanceof Map) { out = new Map(); memo.set(v, out); v.forEach(function (val, key) { out.set(clone(key, memo), clone(val, memo)); }); return out; }
    if (v instanceof Set) { out = new Set(); memo.set(v, out); v.forEach(function (val) { out.add(clone(val, memo)); }); return out; }
    if (v instanceof ArrayBuffer) { out = v.slice(0); memo.set(v, out); return out; }
    if (ArrayBuffer.isView(v)) { out = new v.constructor(clone(v.buffer, memo), v.byteOffset, v instanceof DataView ? v.byteLength : v.length); memo.set(v, out); return out; }
    if (v instanceof Error) { out = new Error(v.message); out.name = v.name; out.stack = v.stack; memo.set(v, out); return out; }
    if (v instanceof Promise || v instanceof WeakMap || v instanceof WeakSet) throw cloneError('object could not be cloned');
    out = {}; memo.set(v, out);
    var keys = Object.keys(v);
    for (var k = 0; k < keys.length; k++) out[keys[k]] = clone(v[keys[k]], memo);
    return out;
  }
  define('structuredClone', function structuredClone(value) { return clone(value, new Map()); });

  // ---- plumbing for the harness (taken and deleted by the harness module before user code runs) ----
  var internal = {
    randomUUID: randomUUID,
    enter: function (key, name, now) { current = { key: key, name: name, now: now }; },
    leave: function () { current = null; },
    /** The actor key the code currently runs for (host calls are attributed to it), or null. */
    currentKey: function () { return current ? current.key : null; },
    /** After a CPU-time limit fired (finally blocks do not run then), forget any call context. */
    reset: function () { current = null; versionLogContext = null; },
    setNow: function (now) { if (current) current.now = now; },
    withLogContext: function (machineInstanceName, fn) {
      versionLogContext = { machineInstanceName: machineInstanceName };
      try { return fn(); } finally { versionLogContext = null; }
    },
    logError: function () { emit('error', arguments); },
    addTimer: function (owner, fn, delay, meta) { return addTimer(owner, fn, delay, [], false, meta); },
    rearmTimer: function (owner, fn, id, dueAt, meta) { return addTimer(owner, fn, 0, [], false, meta, id, dueAt); },
    clearTimer: function (id) { timers.delete(id); },
    clearOwner: function (owner, kind) {
      timers.forEach(function (t, id) {
        if (t.owner === owner && (!kind || (t.meta ? 'event' : 'callback') === kind)) timers.delete(id);
      });
    },
    timersOf: function (owner) {
      var list = [];
      timers.forEach(function (t) { if (t.owner === owner) list.push(t); });
      list.sort(function (a, b) { return a.dueAt - b.dueAt || a.n - b.n; });
      return list.map(function (t) {
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
        var next = null;
        timers.forEach(function (t) {
          if (t.owner === owner && t.dueAt <= now && (!next || t.dueAt < next.dueAt || (t.dueAt === next.dueAt && t.n < next.n))) next = t;
        });
        if (!next) return;
        var firedAt = next.dueAt;
        if (next.interval) next.dueAt += next.interval; else timers.delete(next.id);
        // timers scheduled by this callback count from its due time, so a late advance catches up
        // on a chain of delays exactly as a punctual clock would have
        if (current) current.now = firedAt;
        try { next.fn.apply(undefined, next.args); }
        catch (e) { if (onError(e, next) === false) break; }
      }
      if (current) current.now = now;
    }
  };
  define('__statehold_internal', internal);
})`;
