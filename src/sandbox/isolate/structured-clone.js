/**
 * In-isolate structuredClone (wire-protocol §7.3): JSON-like values, Map, Set, Date, RegExp,
 * ArrayBuffer, typed arrays and Error, with shared and cyclic references kept; anything else (a
 * function, a Promise, a WeakMap) is a DataCloneError. A script that defines the global, run once per
 * isolate after globals.js, before any user code. Nothing from the host.
 */
(function installStructuredClone() {
  'use strict';
  var G = globalThis;
  function define(name, value) {
    Object.defineProperty(G, name, { value: value, writable: true, configurable: true, enumerable: false });
  }
  function cloneError(msg) {
    var e = new Error(msg);
    e.name = 'DataCloneError';
    return e;
  }
  function clone(v, memo) {
    if (v === null || (typeof v !== 'object' && typeof v !== 'function')) {
      if (typeof v === 'symbol') throw cloneError('Symbol could not be cloned');
      return v;
    }
    if (typeof v === 'function') throw cloneError('function could not be cloned');
    if (memo.has(v)) return memo.get(v);
    var out;
    if (Array.isArray(v)) {
      out = [];
      memo.set(v, out);
      for (var i = 0; i < v.length; i++) out[i] = clone(v[i], memo);
      return out;
    }
    if (v instanceof Date) {
      out = new Date(v.getTime());
      memo.set(v, out);
      return out;
    }
    if (v instanceof RegExp) {
      out = new RegExp(v.source, v.flags);
      memo.set(v, out);
      return out;
    }
    if (v instanceof Map) {
      out = new Map();
      memo.set(v, out);
      v.forEach(function (val, key) {
        out.set(clone(key, memo), clone(val, memo));
      });
      return out;
    }
    if (v instanceof Set) {
      out = new Set();
      memo.set(v, out);
      v.forEach(function (val) {
        out.add(clone(val, memo));
      });
      return out;
    }
    if (v instanceof ArrayBuffer) {
      out = v.slice(0);
      memo.set(v, out);
      return out;
    }
    if (ArrayBuffer.isView(v)) {
      var view = /** @type {any} */ (v);
      out = new view.constructor(clone(view.buffer, memo), view.byteOffset, view instanceof DataView ? view.byteLength : view.length);
      memo.set(v, out);
      return out;
    }
    if (v instanceof Error) {
      out = new Error(v.message);
      out.name = v.name;
      out.stack = v.stack;
      memo.set(v, out);
      return out;
    }
    if (v instanceof Promise || v instanceof WeakMap || v instanceof WeakSet) throw cloneError('object could not be cloned');
    out = {};
    memo.set(v, out);
    var keys = Object.keys(v);
    for (var k = 0; k < keys.length; k++) out[keys[k]] = clone(v[keys[k]], memo);
    return out;
  }
  define('structuredClone', function structuredClone(value) {
    return clone(value, new Map());
  });
})();
