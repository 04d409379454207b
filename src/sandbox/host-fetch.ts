/**
 * The host side of machine code's `fetch` (design.md §5): performs one request with undici on behalf of
 * an isolate, under the egress policy. Nothing here is reachable from the isolate except through the
 * audited fetch callback in host-callbacks.ts, which hands in plain data and gets plain data back.
 *
 * - Every hop is checked: the URL is parsed by the WHATWG parser on the host, the host name resolved,
 *   every address checked (egress-policy.ts), and the connection pinned to exactly those addresses
 *   through a per-hop undici Agent whose `connect.lookup` returns them, so a DNS answer that changes
 *   between the check and the connect (rebinding) cannot reach anything else.
 * - Redirects are followed here, not by undici, at most MAX_REDIRECTS hops, each hop re-checked;
 *   `redirect: "manual"` hands the 3xx response back, `"error"` fails. 303 (and 301/302 after POST)
 *   turn into GET without a body; credentials (authorization, cookie) are dropped across origins.
 * - The caller's signal bounds the whole call (DNS, connect, redirects, body); the body is read up to
 *   `maxResponseBytes` (after decompression) and the call fails beyond it.
 * - Failures are FetchFailure with a reason meant for machine code: no host stack, no host objects.
 */
import type { LookupFunction } from 'node:net';
import type { Agent } from 'undici';
import { onFirstUse } from '../domain/on-first-use.js';
import { destinationOf, resolveDestination, systemLookup, type AllowEntry, type Lookup, type ResolvedAddress } from './egress-policy.js';

/**
 * undici, loaded on the first fetch: a node and each of its sandbox workers otherwise spend ≈ 0.1 s of
 * CPU at start loading it (of ≈ 0.5 and 0.3 s in all), and most never fetch.
 */
const undici: () => Promise<typeof import('undici')> = onFirstUse(() => import('undici'));

const MAX_REDIRECTS = 5;
const MAX_REQUEST_BODY_BYTES = 1024 * 1024;

export interface HostFetchRequest {
  url: string;
  method: string;
  headers: [string, string][];
  body: Uint8Array | undefined;
  redirect: 'follow' | 'error' | 'manual';
}

export interface HostFetchResponse {
  status: number;
  statusText: string;
  url: string;
  redirected: boolean;
  headers: [string, string][];
  body: Uint8Array;
}

interface HostFetchPolicy {
  allow: readonly AllowEntry[];
  maxResponseBytes: number;
  lookup?: Lookup;
}

/** A failure whose message may be shown to machine code as `fetch failed: <message>`. */
export class FetchFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FetchFailure';
  }
}

const DROPPED_REQUEST_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
]);
const CROSS_ORIGIN_DROPPED = new Set(['authorization', 'cookie', 'proxy-authorization']);
const BODY_HEADERS = new Set(['content-type', 'content-encoding', 'content-language', 'content-location']);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A lookup that answers only the addresses that were checked, whatever it is asked. */
export function pinnedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  return ((_hostname: string, options: unknown, callback: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (err: Error | null, address: unknown, family?: number) => void;
    const opts = (typeof options === 'object' && options !== null ? options : {}) as { all?: boolean; family?: number | string };
    const wanted = opts.family === 4 || opts.family === 'IPv4' ? 4 : opts.family === 6 || opts.family === 'IPv6' ? 6 : 0;
    const list = wanted === 0 ? addresses : addresses.filter((a) => a.family === wanted);
    if (list.length === 0) {
      cb(Object.assign(new Error('no checked address of the requested family'), { code: 'ENOTFOUND' }), undefined);
      return;
    }
    if (opts.all === true)
      cb(
        null,
        list.map((a) => ({ address: a.address, family: a.family })),
      );
    else cb(null, list[0]?.address, list[0]?.family);
  }) as LookupFunction;
}

/** Plain-language reason for an undici/socket failure (its code, never its stack). */
function describeNetworkError(e: unknown): string {
  let cur: unknown = e;
  for (let depth = 0; depth < 4 && cur !== null && typeof cur === 'object'; depth++) {
    if (cur instanceof FetchFailure) return cur.message;
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') {
      switch (code) {
        case 'ECONNREFUSED':
          return 'connection refused';
        case 'ECONNRESET':
          return 'connection reset';
        case 'ENOTFOUND':
          return 'could not resolve the host';
        case 'ETIMEDOUT':
        case 'UND_ERR_CONNECT_TIMEOUT':
          return 'connect timed out';
        case 'EHOSTUNREACH':
        case 'ENETUNREACH':
          return 'host unreachable';
        case 'UND_ERR_SOCKET':
          return 'the connection closed unexpectedly';
        case 'UND_ERR_HEADERS_OVERFLOW':
          return 'response headers too large';
        case 'UND_ERR_INVALID_ARG':
          return 'invalid request';
        default:
          if (/^(ERR_TLS|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|ERR_SSL)/.test(code)) return `TLS error (${code})`;
          if (/^[A-Z0-9_]{2,40}$/.test(code)) return `network error (${code})`;
      }
    }
    cur = (cur as { cause?: unknown }).cause;
  }
  return 'network error';
}

const sameOrigin = (a: URL, b: URL): boolean => a.protocol === b.protocol && a.host === b.host;

function parseUrl(text: string): URL {
  try {
    return new URL(text);
  } catch {
    throw new FetchFailure('invalid URL');
  }
}

/** Validates what the isolate sent; throws FetchFailure. */
function checkRequest(req: HostFetchRequest): void {
  if (!TOKEN.test(req.method)) throw new FetchFailure(`invalid method ${JSON.stringify(req.method.slice(0, 40))}`);
  if (/^(CONNECT|TRACE|TRACK)$/i.test(req.method)) throw new FetchFailure(`method ${req.method.toUpperCase()} is not allowed`);
  if (req.body !== undefined && req.body.byteLength > MAX_REQUEST_BODY_BYTES) {
    throw new FetchFailure(`request body exceeds the limit of ${MAX_REQUEST_BODY_BYTES} bytes`);
  }
  if (req.body !== undefined && /^(GET|HEAD)$/i.test(req.method)) throw new FetchFailure('a GET or HEAD request cannot have a body');
  for (const [name, value] of req.headers) {
    if (!TOKEN.test(name)) throw new FetchFailure(`invalid header name ${JSON.stringify(name.slice(0, 40))}`);
    if (/[\r\n\0]/.test(value)) throw new FetchFailure(`invalid value for header ${name}`);
  }
}

async function readLimited(body: ReadableStream<Uint8Array> | null, max: number, signal: AbortSignal): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > max) throw new FetchFailure(`response body exceeds the limit of ${max} bytes`);
      chunks.push(value);
    }
  } catch (e) {
    reader.cancel().catch(() => undefined);
    throw e;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Performs the request. Resolves with copied data; rejects only with FetchFailure (a timeout or abort
 * becomes the signal's reason when that is a FetchFailure).
 */
export async function hostFetch(req: HostFetchRequest, policy: HostFetchPolicy, signal: AbortSignal): Promise<HostFetchResponse> {
  const agents: Agent[] = [];
  try {
    checkRequest(req);
    let url = parseUrl(req.url);
    let method = normaliseMethod(req.method);
    let headers = req.headers.filter(([n]) => !DROPPED_REQUEST_HEADERS.has(n.toLowerCase()));
    let body = req.body;
    for (let hop = 0; ; hop++) {
      let dest;
      try {
        dest = destinationOf(url);
      } catch (e) {
        throw new FetchFailure((e as Error).message);
      }
      let addresses: ResolvedAddress[];
      try {
        addresses = await resolveDestination(dest, policy.allow, policy.lookup ?? systemLookup);
      } catch (e) {
        throw new FetchFailure((e as Error).message);
      }
      if (signal.aborted) throw signal.reason;
      const { Agent, fetch: undiciFetch } = await undici();
      const agent = new Agent({ connect: { lookup: pinnedLookup(addresses) }, connections: 1, pipelining: 0 });
      agents.push(agent);
      const res = await undiciFetch(url, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        redirect: 'manual',
        signal,
        dispatcher: agent,
      });
      const location = res.headers.get('location');
      if (REDIRECTS.has(res.status) && location !== null && req.redirect !== 'manual') {
        res.body?.cancel().catch(() => undefined);
        if (req.redirect === 'error') throw new FetchFailure(`redirect to ${location.slice(0, 200)} refused (redirect: "error")`);
        if (hop >= MAX_REDIRECTS) throw new FetchFailure(`too many redirects (more than ${MAX_REDIRECTS})`);
        let next: URL;
        try {
          next = new URL(location, url);
        } catch {
          throw new FetchFailure('redirect to an invalid URL');
        }
        if (res.status === 303 ? method !== 'HEAD' : (res.status === 301 || res.status === 302) && method === 'POST') {
          method = method === 'HEAD' ? 'HEAD' : 'GET';
          body = undefined;
          headers = headers.filter(([n]) => !BODY_HEADERS.has(n.toLowerCase()));
        }
        if (!sameOrigin(url, next)) headers = headers.filter(([n]) => !CROSS_ORIGIN_DROPPED.has(n.toLowerCase()));
        url = next;
        continue;
      }
      const length = Number(res.headers.get('content-length'));
      if (Number.isFinite(length) && length > policy.maxResponseBytes && !res.headers.has('content-encoding')) {
        res.body?.cancel().catch(() => undefined);
        throw new FetchFailure(`response body exceeds the limit of ${policy.maxResponseBytes} bytes`);
      }
      const bytes = await readLimited(res.body, policy.maxResponseBytes, signal);
      const outHeaders: [string, string][] = [];
      res.headers.forEach((value, name) => {
        if (name !== 'set-cookie') outHeaders.push([name, value]);
      });
      for (const cookie of res.headers.getSetCookie()) outHeaders.push(['set-cookie', cookie]);
      return { status: res.status, statusText: res.statusText, url: url.href, redirected: hop > 0, headers: outHeaders, body: bytes };
    }
  } catch (e) {
    if (signal.aborted && signal.reason instanceof FetchFailure) throw signal.reason;
    if (e instanceof FetchFailure) throw e;
    throw new FetchFailure(describeNetworkError(e));
  } finally {
    for (const agent of agents) agent.destroy().catch(() => undefined);
  }
}

const STANDARD_METHODS = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH']);
function normaliseMethod(m: string): string {
  const upper = m.toUpperCase();
  return STANDARD_METHODS.has(upper) ? upper : m;
}
