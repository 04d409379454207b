/**
 * In-isolate TextEncoder/TextDecoder (UTF-8 only) and atob/btoa (wire-protocol §7.3): a script that
 * defines the four globals, run once per isolate after globals.js and before url.js (which encodes
 * with TextEncoder), before any user code. Nothing from the host: pure functions of their input.
 */
(function installEncoding() {
  'use strict';
  var G = globalThis;
  function define(name, value) {
    Object.defineProperty(G, name, { value: value, writable: true, configurable: true, enumerable: false });
  }
  function TextEncoder() {}
  Object.defineProperty(TextEncoder.prototype, 'encoding', {
    get: function () {
      return 'utf-8';
    },
  });
  TextEncoder.prototype.encode = function (input) {
    var str = input === undefined ? '' : String(input);
    var out = [];
    for (var i = 0; i < str.length; i++) {
      var c = str.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
        var d = str.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
        } else c = 0xfffd;
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
  Object.defineProperty(TextDecoder.prototype, 'encoding', {
    get: function () {
      return 'utf-8';
    },
  });
  TextDecoder.prototype.decode = function (input) {
    if (input === undefined) return '';
    var bytes =
      input instanceof ArrayBuffer
        ? new Uint8Array(input)
        : ArrayBuffer.isView(input)
          ? new Uint8Array(input.buffer, input.byteOffset, input.byteLength)
          : null;
    if (!bytes) throw new TypeError('TextDecoder.decode: expected an ArrayBuffer or a view');
    var fatal = this.fatal;
    var out = '';
    var chunk = [];
    function bad() {
      if (fatal) throw new TypeError('The encoded data was not valid utf-8');
      return 0xfffd;
    }
    var i = 0;
    if (!this.ignoreBOM && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) i = 3;
    for (; i < bytes.length;) {
      var b = bytes[i];
      var cp,
        need = 0,
        min = 0;
      if (b < 0x80) {
        cp = b;
      } else if (b >= 0xc2 && b <= 0xdf) {
        cp = b & 0x1f;
        need = 1;
        min = 0x80;
      } else if (b >= 0xe0 && b <= 0xef) {
        cp = b & 0x0f;
        need = 2;
        min = 0x800;
      } else if (b >= 0xf0 && b <= 0xf4) {
        cp = b & 0x07;
        need = 3;
        min = 0x10000;
      } else {
        cp = bad();
      }
      i++;
      if (need) {
        var k = 0;
        while (k < need && i < bytes.length && (bytes[i] & 0xc0) === 0x80) {
          cp = (cp << 6) | (bytes[i] & 0x3f);
          i++;
          k++;
        }
        if (k < need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) cp = bad();
      }
      if (cp > 0xffff) {
        cp -= 0x10000;
        chunk.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else chunk.push(cp);
      if (chunk.length > 8192) {
        out += String.fromCharCode.apply(null, chunk);
        chunk = [];
      }
    }
    return out + String.fromCharCode.apply(null, chunk);
  };
  define('TextEncoder', TextEncoder);
  define('TextDecoder', TextDecoder);

  // ---- atob / btoa ----
  var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function invalidChar(msg) {
    var e = new Error(msg);
    e.name = 'InvalidCharacterError';
    return e;
  }
  define('btoa', function btoa(input) {
    var s = String(input),
      out = '';
    for (var i = 0; i < s.length; i++)
      if (s.charCodeAt(i) > 255) throw invalidChar('btoa: the string contains characters outside of the Latin1 range');
    for (var j = 0; j < s.length; j += 3) {
      var a = s.charCodeAt(j),
        b = s.charCodeAt(j + 1),
        c = s.charCodeAt(j + 2);
      var n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out +=
        B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (j + 1 < s.length ? B64[(n >> 6) & 63] : '=') + (j + 2 < s.length ? B64[n & 63] : '=');
    }
    return out;
  });
  define('atob', function atob(input) {
    var s = String(input).replace(/[\t\n\f\r ]/g, '');
    if (s.length % 4 === 0) s = s.replace(/==?$/, '');
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) throw invalidChar('atob: the string to be decoded is not correctly encoded');
    var out = '',
      bits = 0,
      acc = 0;
    for (var i = 0; i < s.length; i++) {
      acc = (acc << 6) | B64.indexOf(s[i]);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out += String.fromCharCode((acc >> bits) & 255);
      }
    }
    return out;
  });
})();
