/**
 * In-isolate URL and URLSearchParams (no package: whatwg-url drags in tr46/punycode tables and
 * webidl-conversions; this is a small, careful subset of the WHATWG URL standard):
 * - special schemes (http, https, ws, wss, ftp, file) get authority parsing, lower-cased ASCII hosts,
 *   default-port elision, backslash-as-slash, dot-segment removal and percent-encoding;
 * - other schemes keep an opaque host/path;
 * - relative references resolve against a base;
 * - non-ASCII host names are refused (no IDNA) rather than mis-encoded.
 * A script that defines the two globals; run once per isolate after the other globals.
 */
(function installUrl() {
  'use strict';
  var SPECIAL = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'ftp:': '21', 'file:': '' };
  var C0_CONTROL = function (c) {
    return c <= 0x20 || c >= 0x7f;
  };
  var SETS = {
    fragment: ' "<>' + '\u0060',
    query: ' "#<>',
    specialQuery: ' "#<>\'',
    path: ' "#<>?\u0060{}',
    userinfo: ' "#<>?\u0060{}/:;=@[\\]^|',
  };
  function invalid(input) {
    return new TypeError('Invalid URL: ' + input);
  }
  function encodeSet(str, set) {
    var out = '';
    for (var i = 0; i < str.length; i++) {
      var ch = str[i],
        c = str.charCodeAt(i);
      if (c < 0x80 && !C0_CONTROL(c) && set.indexOf(ch) < 0) {
        out += ch;
        continue;
      }
      if (c < 0x80) {
        out += '%' + (c + 0x100).toString(16).slice(1).toUpperCase();
        continue;
      }
      var bytes = new TextEncoder().encode(c >= 0xd800 && c <= 0xdbff ? str.slice(i, i + 2) : ch);
      if (c >= 0xd800 && c <= 0xdbff) i++;
      for (var j = 0; j < bytes.length; j++) out += '%' + (bytes[j] + 0x100).toString(16).slice(1).toUpperCase();
    }
    return out;
  }
  function percentDecode(str) {
    var bytes = [];
    for (var i = 0; i < str.length; i++) {
      var ch = str[i];
      if (ch === '%' && /^[0-9a-fA-F]{2}$/.test(str.slice(i + 1, i + 3))) {
        bytes.push(parseInt(str.slice(i + 1, i + 3), 16));
        i += 2;
      } else {
        var enc = new TextEncoder().encode(ch);
        for (var j = 0; j < enc.length; j++) bytes.push(enc[j]);
      }
    }
    return new TextDecoder().decode(new Uint8Array(bytes));
  }
  function parseHost(raw, special, input) {
    if (raw.charAt(0) === '[') {
      if (raw.charAt(raw.length - 1) !== ']' || !/^\[[0-9a-fA-F:.]+\]$/.test(raw)) throw invalid(input);
      return raw.toLowerCase();
    }
    if (!special) {
      if (/[\u0000\t\n\r #/:<>?@[\\\]^|]/.test(raw)) throw invalid(input);
      return encodeSet(raw, '');
    }
    var host = percentDecode(raw).toLowerCase();
    if (host === '') throw invalid(input);
    if (/[^\u0000-\u007f]/.test(host)) throw new TypeError('Invalid URL (international domain names are not supported): ' + input);
    if (/[\u0000-\u0020#%/:<>?@[\\\]^|\u007f]/.test(host)) throw invalid(input);
    return host;
  }
  function normalizePath(segments, special) {
    var out = [];
    for (var i = 0; i < segments.length; i++) {
      var seg = segments[i],
        lower = seg.toLowerCase();
      var last = i === segments.length - 1;
      if (seg === '..' || lower === '.%2e' || lower === '%2e.' || lower === '%2e%2e') {
        if (out.length) out.pop();
        if (last) out.push('');
      } else if (seg === '.' || lower === '%2e') {
        if (last) out.push('');
      } else {
        out.push(encodeSet(seg, SETS.path));
      }
    }
    return out;
  }
  // record: { protocol, username, password, hostname, port, path: string[] | null (opaque: opaquePath), opaquePath, query: string|null, fragment: string|null, hasAuthority }
  function parse(input, base) {
    var s = String(input)
      .replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '')
      .replace(/[\t\n\r]/g, '');
    var rec = {
      protocol: '',
      username: '',
      password: '',
      hostname: '',
      port: '',
      path: [],
      opaquePath: null,
      query: null,
      fragment: null,
      hasAuthority: false,
    };
    var m = /^([a-zA-Z][a-zA-Z0-9+.\-]*):/.exec(s);
    var rest;
    if (m) {
      rec.protocol = m[1].toLowerCase() + ':';
      rest = s.slice(m[0].length);
    } else {
      if (!base) throw invalid(input);
      return resolveRelative(s, base, input);
    }
    var special = Object.prototype.hasOwnProperty.call(SPECIAL, rec.protocol);
    if (special) rest = rest.replace(/\\/g, '/');
    rest = splitFragmentAndQuery(rest, rec, special);
    if (special && base && base.protocol === rec.protocol && !/^\//.test(rest)) {
      // "http:foo" relative to an http base
      return resolveRelative(rest + serializeTail(rec), base, input);
    }
    if (special || /^\/\//.test(rest)) {
      rest = special ? rest.replace(/^\/*/, '') : rest.slice(2);
      var end = rest.search(/\//);
      var authority = end < 0 ? rest : rest.slice(0, end);
      var pathPart = end < 0 ? '' : rest.slice(end);
      parseAuthority(authority, rec, special, input);
      rec.path = normalizePath(pathPart === '' ? [''] : pathPart.slice(1).split('/'), special);
      if (!special && pathPart === '') rec.path = [];
    } else if (/^\//.test(rest)) {
      rec.path = normalizePath(rest.slice(1).split('/'), false);
    } else {
      rec.path = null;
      rec.opaquePath = encodeSet(rest, '');
    }
    return rec;
  }
  function splitFragmentAndQuery(rest, rec, special) {
    var h = rest.indexOf('#');
    if (h >= 0) {
      rec.fragment = encodeSet(rest.slice(h + 1), SETS.fragment);
      rest = rest.slice(0, h);
    }
    var q = rest.indexOf('?');
    if (q >= 0) {
      rec.query = encodeSet(rest.slice(q + 1), special ? SETS.specialQuery : SETS.query);
      rest = rest.slice(0, q);
    }
    return rest;
  }
  function serializeTail(rec) {
    return (rec.query !== null ? '?' + rec.query : '') + (rec.fragment !== null ? '#' + rec.fragment : '');
  }
  function parseAuthority(authority, rec, special, input) {
    rec.hasAuthority = true;
    var at = authority.lastIndexOf('@');
    if (at >= 0) {
      var userinfo = authority.slice(0, at);
      authority = authority.slice(at + 1);
      var colon = userinfo.indexOf(':');
      rec.username = encodeSet(colon < 0 ? userinfo : userinfo.slice(0, colon), SETS.userinfo);
      rec.password = colon < 0 ? '' : encodeSet(userinfo.slice(colon + 1), SETS.userinfo);
    }
    var pm = /:(\d*)$/.exec(authority);
    if (pm && authority.charAt(0) === '[' && authority.lastIndexOf(']') > pm.index) pm = null;
    var hostPart = pm ? authority.slice(0, pm.index) : authority;
    if (pm && pm[1] !== '') {
      var port = parseInt(pm[1], 10);
      if (port > 65535) throw invalid(input);
      rec.port = String(port) === SPECIAL[rec.protocol] ? '' : String(port);
    }
    if (hostPart === '' && special && rec.protocol !== 'file:') throw invalid(input);
    rec.hostname = hostPart === '' ? '' : parseHost(hostPart, special, input);
    if (rec.protocol === 'file:' && rec.hostname === 'localhost') rec.hostname = '';
  }
  function resolveRelative(s, base, input) {
    var special = Object.prototype.hasOwnProperty.call(SPECIAL, base.protocol);
    if (base.path === null) {
      if (s.charAt(0) !== '#') throw invalid(input);
      var o = copy(base);
      o.fragment = encodeSet(s.slice(1), SETS.fragment);
      return o;
    }
    if (special) s = s.replace(/\\/g, '/');
    if (/^\/\//.test(s)) return parse(base.protocol + s);
    var rec = copy(base);
    rec.fragment = null;
    var rest = splitFragmentAndQuery(s, rec, special);
    if (rest === '') {
      if (s.charAt(0) === '#') rec.query = base.query;
      else if (s.charAt(0) !== '?') rec.query = base.query;
      return rec;
    }
    if (rest.charAt(0) === '/') rec.path = normalizePath(rest.slice(1).split('/'), special);
    else rec.path = normalizePath(base.path.slice(0, -1).concat(rest.split('/')), special);
    return rec;
  }
  function copy(r) {
    return {
      protocol: r.protocol,
      username: r.username,
      password: r.password,
      hostname: r.hostname,
      port: r.port,
      path: r.path ? r.path.slice() : null,
      opaquePath: r.opaquePath,
      query: r.query,
      fragment: r.fragment,
      hasAuthority: r.hasAuthority,
    };
  }
  function hostOf(r) {
    return r.hostname + (r.port ? ':' + r.port : '');
  }
  function pathOf(r) {
    return r.path === null ? r.opaquePath : r.path.length || r.hasAuthority ? '/' + r.path.join('/') : '';
  }
  function hrefOf(r) {
    var auth = '';
    if (r.hasAuthority) {
      var cred = r.username || r.password ? r.username + (r.password ? ':' + r.password : '') + '@' : '';
      auth = '//' + cred + hostOf(r);
    }
    var p = pathOf(r);
    if (!r.hasAuthority && r.path !== null && r.path.length > 1 && r.path[0] === '') p = '/.' + p;
    return r.protocol + auth + p + serializeTail(r);
  }

  var RECORD = new WeakMap();
  function rec(u) {
    var r = RECORD.get(u);
    if (!r) throw new TypeError('Illegal invocation');
    return r;
  }
  function URL(input, base) {
    if (!(this instanceof URL)) throw new TypeError("Failed to construct 'URL': Please use the 'new' operator");
    var b = base === undefined ? undefined : base instanceof URL ? rec(base) : parse(String(base));
    var r = parse(String(input), b);
    RECORD.set(this, r);
    var self = this;
    var params = new URLSearchParams(r.query || '');
    PARAMS_OWNER.set(params, function (q) {
      rec(self).query = q === '' ? null : q;
    });
    Object.defineProperty(this, '_params', { value: params, enumerable: false });
  }
  URL.canParse = function (input, base) {
    try {
      new URL(input, base);
      return true;
    } catch (e) {
      return false;
    }
  };
  function reparse(u, href) {
    var r = parse(href);
    RECORD.set(u, r);
    setParamsFromQuery(u._params, r.query || '');
  }
  function accessor(name, get, set) {
    Object.defineProperty(URL.prototype, name, { get: get, set: set, enumerable: true, configurable: true });
  }
  accessor(
    'href',
    function () {
      return hrefOf(rec(this));
    },
    function (v) {
      reparse(this, String(v));
    },
  );
  accessor('origin', function () {
    var r = rec(this);
    return Object.prototype.hasOwnProperty.call(SPECIAL, r.protocol) && r.protocol !== 'file:' ? r.protocol + '//' + hostOf(r) : 'null';
  });
  accessor(
    'protocol',
    function () {
      return rec(this).protocol;
    },
    function (v) {
      var r = copy(rec(this));
      var p = String(v).replace(/:.*$/, '').toLowerCase() + ':';
      if (/^[a-z][a-z0-9+.\-]*:$/.test(p) && p in SPECIAL === r.protocol in SPECIAL) {
        r.protocol = p;
        if (r.port === SPECIAL[p]) r.port = '';
        reparse(this, hrefOf(r));
      }
    },
  );
  accessor(
    'username',
    function () {
      return rec(this).username;
    },
    function (v) {
      var r = copy(rec(this));
      if (r.hasAuthority && r.hostname) {
        r.username = encodeSet(String(v), SETS.userinfo);
        reparse(this, hrefOf(r));
      }
    },
  );
  accessor(
    'password',
    function () {
      return rec(this).password;
    },
    function (v) {
      var r = copy(rec(this));
      if (r.hasAuthority && r.hostname) {
        r.password = encodeSet(String(v), SETS.userinfo);
        reparse(this, hrefOf(r));
      }
    },
  );
  accessor(
    'host',
    function () {
      return hostOf(rec(this));
    },
    function (v) {
      var r = copy(rec(this));
      if (r.path !== null && r.hasAuthority) {
        var t = copy(parse(r.protocol + '//' + String(v)));
        r.hostname = t.hostname;
        r.port = t.port;
        reparse(this, hrefOf(r));
      }
    },
  );
  accessor(
    'hostname',
    function () {
      return rec(this).hostname;
    },
    function (v) {
      var r = copy(rec(this));
      if (r.path !== null && r.hasAuthority) {
        r.hostname = parse(r.protocol + '//' + String(v).replace(/:.*$/, '')).hostname;
        reparse(this, hrefOf(r));
      }
    },
  );
  accessor(
    'port',
    function () {
      return rec(this).port;
    },
    function (v) {
      var r = copy(rec(this));
      var d = /^\d*/.exec(String(v))[0];
      if (r.hasAuthority && r.hostname && r.protocol !== 'file:') {
        r.port = d === '' ? '' : String(parseInt(d, 10));
        if (parseInt(d, 10) > 65535) return;
        if (r.port === SPECIAL[r.protocol]) r.port = '';
        reparse(this, hrefOf(r));
      }
    },
  );
  accessor(
    'pathname',
    function () {
      return pathOf(rec(this));
    },
    function (v) {
      var r = copy(rec(this));
      if (r.path === null) return;
      var s = String(v);
      if (r.protocol in SPECIAL) s = s.replace(/\\/g, '/');
      r.path = normalizePath((s.charAt(0) === '/' ? s.slice(1) : s).split('/'), r.protocol in SPECIAL);
      r.query = r.query;
      reparse(this, hrefOf(r));
    },
  );
  accessor(
    'search',
    function () {
      var q = rec(this).query;
      return q ? '?' + q : '';
    },
    function (v) {
      var r = copy(rec(this));
      var s = String(v).replace(/^\?/, '');
      r.query = s === '' ? null : encodeSet(s, r.protocol in SPECIAL ? SETS.specialQuery : SETS.query);
      reparse(this, hrefOf(r));
    },
  );
  accessor(
    'hash',
    function () {
      var f = rec(this).fragment;
      return f ? '#' + f : '';
    },
    function (v) {
      var r = copy(rec(this));
      var s = String(v).replace(/^#/, '');
      r.fragment = s === '' ? null : encodeSet(s, SETS.fragment);
      reparse(this, hrefOf(r));
    },
  );
  accessor('searchParams', function () {
    rec(this);
    return this._params;
  });
  URL.prototype.toString = function () {
    return /** @type {any} */ (this).href;
  };
  URL.prototype.toJSON = function () {
    return /** @type {any} */ (this).href;
  };

  // ---- URLSearchParams ----
  var PARAMS_OWNER = new WeakMap();
  var LIST = new WeakMap();
  function formEncode(s) {
    return encodeSet(String(s), ' !"#$%&\'()+,/:;<=>?@[\\]^\u0060{|}~').replace(/%20/g, '+');
  }
  function formDecode(s) {
    return percentDecode(s.replace(/\+/g, ' '));
  }
  function parseQuery(q) {
    var list = [];
    q.split('&').forEach(function (part) {
      if (part === '') return;
      var eq = part.indexOf('=');
      list.push(eq < 0 ? [formDecode(part), ''] : [formDecode(part.slice(0, eq)), formDecode(part.slice(eq + 1))]);
    });
    return list;
  }
  function setParamsFromQuery(params, q) {
    LIST.set(params, parseQuery(q));
  }
  function list(p) {
    var l = LIST.get(p);
    if (!l) throw new TypeError('Illegal invocation');
    return l;
  }
  function update(p) {
    var owner = PARAMS_OWNER.get(p);
    if (owner) owner(p.toString());
  }
  function URLSearchParams(init) {
    if (!(this instanceof URLSearchParams)) throw new TypeError("Failed to construct 'URLSearchParams': Please use the 'new' operator");
    var l = [];
    if (init === undefined || init === null) {
      /* empty */
    } else if (typeof init === 'object' && typeof init[Symbol.iterator] === 'function') {
      for (var pair of init) {
        var arr = Array.from(pair);
        if (arr.length !== 2) throw new TypeError('URLSearchParams: each pair must have exactly two items');
        l.push([String(arr[0]), String(arr[1])]);
      }
    } else if (typeof init === 'object') {
      Object.keys(init).forEach(function (k) {
        l.push([k, String(init[k])]);
      });
    } else {
      l = parseQuery(String(init).replace(/^\?/, ''));
    }
    LIST.set(this, l);
  }
  var P = URLSearchParams.prototype;
  P.append = function (k, v) {
    list(this).push([String(k), String(v)]);
    update(this);
  };
  P['delete'] = function (k, v) {
    var key = String(k),
      l = list(this);
    LIST.set(
      this,
      l.filter(function (e) {
        return !(e[0] === key && (v === undefined || e[1] === String(v)));
      }),
    );
    update(this);
  };
  P.get = function (k) {
    var key = String(k);
    var e = list(this).find(function (x) {
      return x[0] === key;
    });
    return e ? e[1] : null;
  };
  P.getAll = function (k) {
    var key = String(k);
    return list(this)
      .filter(function (x) {
        return x[0] === key;
      })
      .map(function (x) {
        return x[1];
      });
  };
  P.has = function (k, v) {
    var key = String(k);
    return list(this).some(function (x) {
      return x[0] === key && (v === undefined || x[1] === String(v));
    });
  };
  P.set = function (k, v) {
    var key = String(k),
      val = String(v),
      l = list(this),
      out = [],
      done = false;
    l.forEach(function (e) {
      if (e[0] !== key) out.push(e);
      else if (!done) {
        out.push([key, val]);
        done = true;
      }
    });
    if (!done) out.push([key, val]);
    LIST.set(this, out);
    update(this);
  };
  P.sort = function () {
    var l = list(this).map(function (e, i) {
      return [e, i];
    });
    l.sort(function (a, b) {
      return a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1];
    });
    LIST.set(
      this,
      l.map(function (x) {
        return x[0];
      }),
    );
    update(this);
  };
  P.forEach = function (fn, thisArg) {
    var self = this;
    list(this)
      .slice()
      .forEach(function (e) {
        fn.call(thisArg, e[1], e[0], self);
      });
  };
  P.entries = function () {
    return list(this)
      .map(function (e) {
        return [e[0], e[1]];
      })
      [Symbol.iterator]();
  };
  P.keys = function () {
    return list(this)
      .map(function (e) {
        return e[0];
      })
      [Symbol.iterator]();
  };
  P.values = function () {
    return list(this)
      .map(function (e) {
        return e[1];
      })
      [Symbol.iterator]();
  };
  P[Symbol.iterator] = P.entries;
  Object.defineProperty(P, 'size', {
    get: function () {
      return list(this).length;
    },
  });
  P.toString = function () {
    return list(this)
      .map(function (e) {
        return formEncode(e[0]) + '=' + formEncode(e[1]);
      })
      .join('&');
  };

  Object.defineProperty(globalThis, 'URL', { value: URL, writable: true, configurable: true });
  Object.defineProperty(globalThis, 'URLSearchParams', { value: URLSearchParams, writable: true, configurable: true });
})();
