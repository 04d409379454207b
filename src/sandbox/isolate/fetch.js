/**
 * In-isolate source installing `fetch`, `Headers`, `Request` and `Response` (wire-protocol §7.3). It is a
 * function expression the host runs once per isolate, after the globals and the URL classes and before
 * the harness, with ONE audited callback:
 *   hostFetch(owner: string | null, requestJson: string, body: Uint8Array | undefined): string
 * which starts the request on the host (host-fetch.ts) and answers `{"id":n}` or `{"error":"reason"}`
 * at once. The outcome comes back later through the harness's `deliver` export (host → isolate call
 * with copied data only: a JSON head and an ArrayBuffer copy of the body), which settles the pending
 * promise; the callback is captured in this closure and never stored anywhere machine code can reach.
 *
 * Each pending call remembers the actor it was started for (the harness's current actor, or none), so
 * the host can count an actor's calls in flight and drop them when the actor is stopped.
 * Bodies are buffered: `text()`, `json()`, `arrayBuffer()`, `bytes()` read a copy; a body reads once.
 */
(function installFetch(hostFetch) {
  'use strict';
  var G = globalThis;
  var internal = G.__statehold_internal;
  var I = internal.intrinsics; // built-ins captured before any user code runs (globals.js)
  var stringify = I.jsonStringify,
    parse = I.jsonParse;
  function define(name, value) {
    Object.defineProperty(G, name, { value: value, writable: true, configurable: true, enumerable: false });
  }
  var MAX_REQUEST_BODY = 1024 * 1024;
  var TOKEN = /^[!#$%&'*+\-.^_\x60|~0-9A-Za-z]+$/;

  // ---- bytes ----
  function utf8(s) {
    return new TextEncoder().encode(s);
  }
  function copyBytes(data) {
    if (data instanceof ArrayBuffer) return new Uint8Array(data.slice(0));
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
    return null;
  }
  /** body init → { bytes, type } (type: the default content-type, or null) */
  function extractBody(body) {
    if (body === undefined || body === null) return { bytes: null, type: null };
    if (typeof body === 'string') return { bytes: utf8(body), type: 'text/plain;charset=UTF-8' };
    if (body instanceof URLSearchParams) return { bytes: utf8(body.toString()), type: 'application/x-www-form-urlencoded;charset=UTF-8' };
    var bytes = copyBytes(body);
    if (bytes) return { bytes: bytes, type: null };
    throw new TypeError('fetch: unsupported body type (use a string, URLSearchParams, ArrayBuffer or typed array)');
  }

  // ---- Headers ----
  function normaliseValue(v) {
    return String(v).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
  }
  function checkName(n) {
    var name = String(n);
    if (!TOKEN.test(name)) throw new TypeError('Headers: invalid header name ' + stringify(name));
    return name.toLowerCase();
  }
  function checkValue(v) {
    var value = normaliseValue(v);
    if (/[\0\r\n]/.test(value)) throw new TypeError('Headers: invalid header value');
    return value;
  }
  var headerList = new WeakMap();
  function Headers(init) {
    if (!(this instanceof Headers)) throw new TypeError("Failed to construct 'Headers': use 'new'");
    headerList.set(this, []);
    if (init === undefined || init === null) return;
    var self = this;
    if (init instanceof Headers) {
      list(init).forEach(function (p) {
        self.append(p[0], p[1]);
      });
      return;
    }
    if (typeof init !== 'object') throw new TypeError('Headers: init must be an object, an array of pairs or Headers');
    if (typeof init[Symbol.iterator] === 'function') {
      for (var pair of init) {
        var arr = Array.from(pair);
        if (arr.length !== 2) throw new TypeError('Headers: each header must be a [name, value] pair');
        this.append(arr[0], arr[1]);
      }
      return;
    }
    Object.keys(init).forEach(function (k) {
      self.append(k, init[k]);
    });
  }
  function list(h) {
    var l = headerList.get(h);
    if (!l) throw new TypeError('Illegal invocation');
    return l;
  }
  Headers.prototype.append = function (name, value) {
    list(this).push([checkName(name), checkValue(value)]);
  };
  Headers.prototype.set = function (name, value) {
    var n = checkName(name),
      v = checkValue(value),
      l = list(this),
      done = false;
    for (var i = 0; i < l.length; i++) {
      if (l[i][0] !== n) continue;
      if (!done) {
        l[i][1] = v;
        done = true;
      } else {
        l.splice(i, 1);
        i--;
      }
    }
    if (!done) l.push([n, v]);
  };
  Headers.prototype.delete = function (name) {
    var n = checkName(name),
      l = list(this);
    for (var i = l.length - 1; i >= 0; i--) if (l[i][0] === n) l.splice(i, 1);
  };
  Headers.prototype.get = function (name) {
    var n = checkName(name),
      values = [];
    list(this).forEach(function (p) {
      if (p[0] === n) values.push(p[1]);
    });
    return values.length ? values.join(', ') : null;
  };
  Headers.prototype.getSetCookie = function () {
    return list(this)
      .filter(function (p) {
        return p[0] === 'set-cookie';
      })
      .map(function (p) {
        return p[1];
      });
  };
  Headers.prototype.has = function (name) {
    var n = checkName(name);
    return list(this).some(function (p) {
      return p[0] === n;
    });
  };
  /** sorted, combined (set-cookie kept apart), as the spec iterates */
  function sortedPairs(h) {
    var names = [],
      seen = {};
    list(h).forEach(function (p) {
      if (!seen[p[0]]) {
        seen[p[0]] = true;
        names.push(p[0]);
      }
    });
    names.sort();
    var out = [];
    names.forEach(function (n) {
      if (n === 'set-cookie')
        h.getSetCookie().forEach(function (c) {
          out.push([n, c]);
        });
      else out.push([n, h.get(n)]);
    });
    return out;
  }
  Headers.prototype.forEach = function (cb, thisArg) {
    var self = this;
    sortedPairs(this).forEach(function (p) {
      cb.call(thisArg, p[1], p[0], self);
    });
  };
  Headers.prototype.entries = function () {
    return sortedPairs(this)[Symbol.iterator]();
  };
  Headers.prototype.keys = function () {
    return sortedPairs(this)
      .map(function (p) {
        return p[0];
      })
      [Symbol.iterator]();
  };
  Headers.prototype.values = function () {
    return sortedPairs(this)
      .map(function (p) {
        return p[1];
      })
      [Symbol.iterator]();
  };
  Headers.prototype[Symbol.iterator] = Headers.prototype.entries;
  Object.defineProperty(Headers.prototype, Symbol.toStringTag, { value: 'Headers', configurable: true });

  // ---- Body (buffered) ----
  var bodies = new WeakMap(); // object -> { bytes: Uint8Array|null, used: boolean }
  function consume(obj) {
    var b = bodies.get(obj);
    if (!b) return Promise.reject(new TypeError('Illegal invocation'));
    if (b.used) return Promise.reject(new TypeError('Body is unusable: body has already been read'));
    b.used = true;
    return Promise.resolve(b.bytes ? b.bytes.slice(0) : new Uint8Array(0));
  }
  function mixBody(proto) {
    proto.arrayBuffer = function () {
      return consume(this).then(function (u) {
        return u.buffer;
      });
    };
    proto.bytes = function () {
      return consume(this);
    };
    proto.text = function () {
      return consume(this).then(function (u) {
        return new TextDecoder().decode(u);
      });
    };
    proto.json = function () {
      return this.text().then(function (t) {
        return parse(t);
      });
    };
    Object.defineProperty(proto, 'bodyUsed', {
      configurable: true,
      get: function () {
        var b = bodies.get(this);
        return !!(b && b.used);
      },
    });
    Object.defineProperty(proto, 'body', {
      configurable: true,
      get: function () {
        return null;
      },
    });
  }

  // ---- Request ----
  var requests = new WeakMap();
  function Request(input, init) {
    if (!(this instanceof Request)) throw new TypeError("Failed to construct 'Request': use 'new'");
    init = init || {};
    var base = input instanceof Request ? requests.get(input) : null;
    var url;
    if (base) url = base.url;
    else if (input instanceof URL) url = input.href;
    else if (input !== null && typeof input === 'object' && typeof input.url === 'string') url = input.url;
    else url = String(input);
    var parsed;
    try {
      parsed = new URL(url);
    } catch (e) {
      throw new TypeError('fetch: invalid URL ' + stringify(String(url).slice(0, 200)));
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new TypeError('fetch: only http: and https: URLs are supported, not ' + parsed.protocol);
    var method =
      init.method !== undefined
        ? String(init.method)
        : base
          ? base.method
          : input !== null && typeof input === 'object' && typeof input.method === 'string'
            ? input.method
            : 'GET';
    if (!TOKEN.test(method)) throw new TypeError('fetch: invalid method ' + stringify(method));
    var upper = method.toUpperCase();
    if (['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH'].indexOf(upper) >= 0) method = upper;
    if (['CONNECT', 'TRACE', 'TRACK'].indexOf(upper) >= 0) throw new TypeError('fetch: method ' + upper + ' is not allowed');
    var headers = new Headers(
      init.headers !== undefined
        ? init.headers
        : base
          ? base.headers
          : (input !== null && typeof input === 'object' && !(input instanceof URL) && input.headers) || undefined,
    );
    var bytes = null;
    if (init.body !== undefined && init.body !== null) {
      var ex = extractBody(init.body);
      bytes = ex.bytes;
      if (ex.type && !headers.has('content-type')) headers.set('content-type', ex.type);
    } else if (base) {
      var b = bodies.get(input);
      bytes = b && b.bytes ? b.bytes.slice(0) : null;
    }
    if (bytes && (method === 'GET' || method === 'HEAD')) throw new TypeError('fetch: a ' + method + ' request cannot have a body');
    if (bytes && bytes.byteLength > MAX_REQUEST_BODY)
      throw new TypeError('fetch: the request body exceeds the limit of ' + MAX_REQUEST_BODY + ' bytes');
    var redirect = init.redirect !== undefined ? String(init.redirect) : base ? base.redirect : 'follow';
    if (redirect !== 'follow' && redirect !== 'error' && redirect !== 'manual')
      throw new TypeError('fetch: redirect must be follow, error or manual');
    requests.set(this, { url: parsed.href, method: method, headers: headers, redirect: redirect });
    bodies.set(this, { bytes: bytes, used: false });
  }
  function req(r) {
    var s = requests.get(r);
    if (!s) throw new TypeError('Illegal invocation');
    return s;
  }
  ['url', 'method', 'headers', 'redirect'].forEach(function (k) {
    Object.defineProperty(Request.prototype, k, {
      configurable: true,
      get: function () {
        return req(this)[k];
      },
    });
  });
  mixBody(Request.prototype);
  Request.prototype.clone = function () {
    var b = bodies.get(this);
    if (b && b.used) throw new TypeError('Request.clone: body has already been read');
    return new Request(this);
  };
  Object.defineProperty(Request.prototype, Symbol.toStringTag, { value: 'Request', configurable: true });

  // ---- Response ----
  var responses = new WeakMap();
  function Response(body, init) {
    if (!(this instanceof Response)) throw new TypeError("Failed to construct 'Response': use 'new'");
    init = init || {};
    var status = init.status === undefined ? 200 : Number(init.status);
    if (!(status >= 200 && status <= 599 && Math.floor(status) === status))
      throw new RangeError('Response: status must be an integer from 200 to 599');
    var headers = new Headers(init.headers);
    var ex = extractBody(body);
    if (ex.type && !headers.has('content-type')) headers.set('content-type', ex.type);
    responses.set(this, {
      status: status,
      statusText: init.statusText === undefined ? '' : String(init.statusText),
      headers: headers,
      url: '',
      redirected: false,
      type: 'default',
    });
    bodies.set(this, { bytes: ex.bytes, used: false });
  }
  function res(r) {
    var s = responses.get(r);
    if (!s) throw new TypeError('Illegal invocation');
    return s;
  }
  ['status', 'statusText', 'headers', 'url', 'redirected', 'type'].forEach(function (k) {
    Object.defineProperty(Response.prototype, k, {
      configurable: true,
      get: function () {
        return res(this)[k];
      },
    });
  });
  Object.defineProperty(Response.prototype, 'ok', {
    configurable: true,
    get: function () {
      var s = res(this).status;
      return s >= 200 && s <= 299;
    },
  });
  mixBody(Response.prototype);
  Response.prototype.clone = function () {
    var b = bodies.get(this);
    if (b && b.used) throw new TypeError('Response.clone: body has already been read');
    var s = res(this);
    var c = Object.create(Response.prototype);
    responses.set(c, {
      status: s.status,
      statusText: s.statusText,
      headers: new Headers(s.headers),
      url: s.url,
      redirected: s.redirected,
      type: s.type,
    });
    bodies.set(c, { bytes: b && b.bytes ? b.bytes.slice(0) : null, used: false });
    return c;
  };
  Response.json = function (data, init) {
    var text = stringify(data);
    if (text === undefined) throw new TypeError('Response.json: the value is not JSON-serialisable');
    var headers = new Headers(init && init.headers);
    if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    return new Response(text, { status: init && init.status, statusText: init && init.statusText, headers: headers });
  };
  Object.defineProperty(Response.prototype, Symbol.toStringTag, { value: 'Response', configurable: true });

  /** A response delivered by the host: { status, statusText, url, redirected, headers: [[n, v]...] } + body bytes. */
  function hostResponse(head, body) {
    var r = Object.create(Response.prototype);
    var headers = new Headers();
    var l = list(headers);
    for (var i = 0; i < head.headers.length; i++) l.push([String(head.headers[i][0]).toLowerCase(), String(head.headers[i][1])]);
    responses.set(r, {
      status: head.status,
      statusText: head.statusText,
      headers: headers,
      url: head.url,
      redirected: head.redirected,
      type: 'basic',
    });
    bodies.set(r, { bytes: body instanceof ArrayBuffer ? new Uint8Array(body) : new Uint8Array(0), used: false });
    return r;
  }

  // ---- fetch ----
  var pending = new I.Map(); // id -> { owner, resolve, reject }
  function fetch(input, init) {
    return new Promise(function (resolve, reject) {
      var r = new Request(input, init);
      var s = req(r);
      var b = bodies.get(r);
      var head = {
        url: s.url,
        method: s.method,
        headers: list(s.headers).map(function (p) {
          return [p[0], p[1]];
        }),
        redirect: s.redirect,
      };
      var owner = internal.currentKey();
      var answer = parse(String(hostFetch(owner, stringify(head), b.bytes ? b.bytes : undefined)));
      if (answer && typeof answer.id === 'number') I.mapSet(pending, answer.id, { owner: owner, resolve: resolve, reject: reject });
      else reject(new TypeError('fetch failed: ' + String(answer && answer.error)));
    });
  }
  define('fetch', fetch);
  define('Headers', Headers);
  define('Request', Request);
  define('Response', Response);

  // plumbing for the harness
  internal.hostCallOwner = function (id) {
    var p = I.mapGet(pending, id);
    return p ? p.owner : undefined;
  };
  internal.settleHostCall = function (id, headJson, body) {
    var p = I.mapGet(pending, id);
    if (!p) return false;
    I.mapDelete(pending, id);
    var head = parse(headJson);
    if (typeof head.error === 'string') p.reject(new TypeError('fetch failed: ' + head.error));
    else p.resolve(hostResponse(head, body));
    return true;
  };
  internal.dropHostCalls = function (owner) {
    var ids = [];
    I.mapForEach(pending, function (p, id) {
      if (p.owner === owner) I.arrayPush(ids, id);
    });
    for (var i = 0; i < ids.length; i++) I.mapDelete(pending, ids[i]);
  };
});
