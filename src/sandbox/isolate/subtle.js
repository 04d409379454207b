/**
 * In-isolate source installing `crypto.subtle` with digests (SHA-1/256/384/512) and HMAC (importKey
 * raw/jwk, generateKey, exportKey raw/jwk, sign, verify). A function expression run once per isolate
 * with ONE audited callback:
 *   hostCrypto(op: 'digest' | 'hmac' | 'hmac-verify', hash: string, data: Uint8Array,
 *              key: Uint8Array | undefined, signature: Uint8Array | undefined): ArrayBuffer | string
 * computed synchronously by node:crypto (a string answer is an error message). Results are handed out
 * as ArrayBuffers in already-settled promises. Key bytes stay in this closure (a WeakMap keyed by the
 * opaque CryptoKey object).
 */
(function installSubtle(hostCrypto) {
  'use strict';
  var G = globalThis;
  function named(name, message) {
    var e = new Error(message);
    e.name = name;
    return e;
  }
  function bytesOf(data, what) {
    if (data instanceof ArrayBuffer) return new Uint8Array(data.slice(0));
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
    throw new TypeError(what + ' must be an ArrayBuffer or an ArrayBufferView');
  }
  var HASHES = { 'SHA-1': 1, 'SHA-256': 1, 'SHA-384': 1, 'SHA-512': 1 };
  function hashName(alg) {
    var n = typeof alg === 'string' ? alg : alg && typeof alg === 'object' ? alg.name : undefined;
    var u = String(n).toUpperCase();
    if (!HASHES[u]) throw named('NotSupportedError', 'Unrecognized or unsupported hash algorithm: ' + String(n));
    return u;
  }
  function algName(alg) {
    var n = typeof alg === 'string' ? alg : alg && typeof alg === 'object' ? alg.name : undefined;
    return String(n).toUpperCase();
  }
  function host(op, hash, data, key, sig) {
    var r = hostCrypto(op, hash, data, key, sig);
    if (typeof r === 'string') throw named('OperationError', r);
    return r;
  }
  function later(fn) {
    return new Promise(function (resolve) {
      resolve(fn());
    });
  }

  var keys = new WeakMap(); // CryptoKey -> Uint8Array
  function CryptoKey() {
    throw new TypeError('Illegal constructor');
  }
  Object.defineProperty(CryptoKey.prototype, Symbol.toStringTag, { value: 'CryptoKey', configurable: true });
  var USAGES = ['sign', 'verify'];
  function makeKey(bytes, hash, extractable, usages) {
    var list = Array.from(usages || []).map(String);
    for (var i = 0; i < list.length; i++) {
      if (USAGES.indexOf(list[i]) < 0) throw named('SyntaxError', 'HMAC keys can only be used to sign and verify, not ' + list[i]);
    }
    if (list.length === 0) throw named('SyntaxError', 'usages must not be empty');
    if (bytes.length === 0) throw named('DataError', 'an HMAC key must not be empty');
    var k = Object.create(CryptoKey.prototype);
    Object.defineProperties(k, {
      type: { value: 'secret', enumerable: true },
      extractable: { value: !!extractable, enumerable: true },
      algorithm: {
        value: Object.freeze({ name: 'HMAC', hash: Object.freeze({ name: hash }), length: bytes.length * 8 }),
        enumerable: true,
      },
      usages: { value: Object.freeze(list), enumerable: true },
    });
    keys.set(k, bytes);
    return k;
  }
  function keyBytes(key, usage) {
    var b = keys.get(key);
    if (!b) throw new TypeError('key is not a CryptoKey');
    if (key.usages.indexOf(usage) < 0) throw named('InvalidAccessError', 'the key does not allow ' + usage);
    return b;
  }
  function checkHmac(alg) {
    if (algName(alg) !== 'HMAC') throw named('NotSupportedError', 'only HMAC is supported (and digest)');
  }
  function b64url(bytes) {
    var s = '';
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function fromB64url(text) {
    var s = atob(String(text).replace(/-/g, '+').replace(/_/g, '/'));
    var out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  var JWK_ALG = { 'SHA-1': 'HS1', 'SHA-256': 'HS256', 'SHA-384': 'HS384', 'SHA-512': 'HS512' };

  var subtle = {
    digest: function (alg, data) {
      return later(function () {
        return host('digest', hashName(alg), bytesOf(data, 'data'));
      });
    },
    importKey: function (format, keyData, alg, extractable, usages) {
      return later(function () {
        checkHmac(alg);
        var hash = hashName(alg.hash);
        var bytes;
        if (format === 'raw') bytes = bytesOf(keyData, 'keyData');
        else if (format === 'jwk') {
          if (!keyData || keyData.kty !== 'oct' || typeof keyData.k !== 'string') throw named('DataError', 'expected an oct JWK with k');
          bytes = fromB64url(keyData.k);
        } else throw named('NotSupportedError', 'key format ' + String(format) + ' is not supported (raw, jwk)');
        if (alg.length !== undefined && Number(alg.length) !== bytes.length * 8)
          throw named('DataError', 'length does not match the key data');
        return makeKey(bytes, hash, extractable, usages);
      });
    },
    generateKey: function (alg, extractable, usages) {
      return later(function () {
        checkHmac(alg);
        var hash = hashName(alg.hash);
        var bits = alg.length !== undefined ? Number(alg.length) : hash === 'SHA-384' || hash === 'SHA-512' ? 1024 : 512;
        if (!(bits > 0 && bits % 8 === 0 && bits <= 8192)) throw named('OperationError', 'unsupported key length');
        return makeKey(G.crypto.getRandomValues(new Uint8Array(bits / 8)), hash, extractable, usages);
      });
    },
    exportKey: function (format, key) {
      return later(function () {
        var b = keys.get(key);
        if (!b) throw new TypeError('key is not a CryptoKey');
        if (!key.extractable) throw named('InvalidAccessError', 'the key is not extractable');
        if (format === 'raw') return b.slice(0).buffer;
        if (format === 'jwk')
          return { kty: 'oct', k: b64url(b), alg: JWK_ALG[key.algorithm.hash.name], ext: true, key_ops: key.usages.slice() };
        throw named('NotSupportedError', 'key format ' + String(format) + ' is not supported (raw, jwk)');
      });
    },
    sign: function (alg, key, data) {
      return later(function () {
        checkHmac(alg);
        var k = keyBytes(key, 'sign');
        return host('hmac', key.algorithm.hash.name, bytesOf(data, 'data'), k);
      });
    },
    verify: function (alg, key, signature, data) {
      return later(function () {
        checkHmac(alg);
        var k = keyBytes(key, 'verify');
        var r = host('hmac-verify', key.algorithm.hash.name, bytesOf(data, 'data'), k, bytesOf(signature, 'signature'));
        return new Uint8Array(r)[0] === 1;
      });
    },
  };
  ['encrypt', 'decrypt', 'deriveBits', 'deriveKey', 'wrapKey', 'unwrapKey'].forEach(function (name) {
    subtle[name] = function () {
      return Promise.reject(named('NotSupportedError', 'crypto.subtle.' + name + ' is not supported here (digest and HMAC are)'));
    };
  });
  Object.defineProperty(G.crypto, 'subtle', { value: subtle, enumerable: true, configurable: true, writable: false });
  Object.defineProperty(G, 'CryptoKey', { value: CryptoKey, writable: true, configurable: true, enumerable: false });
});
