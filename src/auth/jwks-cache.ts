import { isIP } from 'node:net';
import type { JWK, KeyLike } from 'jose';
import { MAX_JSON_DEPTH, tooDeep } from '../domain/json-depth.js';
import { RecencyMap } from '../domain/recency-map.js';
import { destinationOf, refusal, systemLookup, type AllowEntry, type Lookup, type ResolvedAddress } from '../sandbox/egress-policy.js';
import { FetchFailure, hostFetch } from '../sandbox/host-fetch.js';
import { jose } from './jose-module.js';

/**
 * The JWKS documents of identity providers configured with a `jwksUrl` (wire-protocol §3.7), fetched
 * for token exchange (docs/token-exchange.md "Identity provider keys").
 *
 * The URL is org-admin input and the fetch is triggered by unauthenticated `POST /tokens` calls, so it
 * goes through the same egress policy as machine code's fetch (host-fetch.ts: loopback and private
 * addresses refused unless `--fetch-allow` opens them, DNS pinned, body bounded), and how often a URL
 * is fetched is bounded by this cache, not by callers: a document is kept `ttlMs`; a token whose `kid`
 * the document lacks refetches at most once per `minRefreshIntervalMs` per URL; concurrent callers
 * share one fetch; a failed fetch is not retried within `minRefreshIntervalMs` either.
 *
 * The one import of src/auth from src/sandbox (design.md §3 lists only store and domain): the egress
 * policy and its pinned fetch are the sandbox's, and a JWKS URL must go exactly where machine code's
 * fetch may, not through a second copy of the rules.
 */

type JwksFailureCode =
  /** The URL is not https (or http to an allowed host), or the egress policy refuses its addresses. */
  | 'url-refused'
  /** Network failure, timeout, redirect, or a body over the size limit. */
  | 'fetch-failed'
  | 'bad-status'
  /** Not JSON, or JSON without a `keys` array. */
  | 'bad-document'
  /** No key in the set fits the token (unknown `kid`, or none for its algorithm). */
  | 'no-matching-key'
  /** The token has no `kid` and several keys in the set fit it. */
  | 'ambiguous-key'
  /** The matching JWK could not be imported. */
  | 'bad-key';

/** Why no key came out of a JWKS. The message is for logs: it names the URL, never key material. */
export class JwksFailure extends Error {
  constructor(
    readonly code: JwksFailureCode,
    message: string,
  ) {
    super(message);
    this.name = 'JwksFailure';
  }
}

interface JwksCacheOptions {
  /** The parsed `--fetch-allow` list, the same one machine fetch gets. */
  allow: readonly AllowEntry[];
  /** Whole-fetch budget (DNS, connect, body). */
  timeoutMs: number;
  maxBytes?: number;
  ttlMs?: number;
  minRefreshIntervalMs?: number;
  /** URLs kept; the least recently used goes first. */
  maxUrls?: number;
  lookup?: Lookup;
  now?: () => number;
}

interface TokenHeader {
  alg: string;
  kid?: string | undefined;
}

export type VerificationKey = KeyLike | Uint8Array;

const DEFAULT_JWKS_MAX_BYTES = 256 * 1024;
const DEFAULT_JWKS_TTL_MS = 10 * 60_000;
const DEFAULT_JWKS_MIN_REFRESH_MS = 30_000;
const DEFAULT_JWKS_MAX_URLS = 1_000;
/** More keys than any IdP publishes (they rotate through two or three); bounds the work per token. */
const MAX_JWKS_KEYS = 100;

interface JwksDocument {
  keys: JWK[];
  fetchedAt: number;
  /** Imported keys by `<index in keys> <alg>`: importing costs more than verifying. */
  imported: Map<string, Promise<VerificationKey>>;
}

interface UrlEntry {
  document: JwksDocument | undefined;
  /** When the last fetch started (success or not). */
  lastFetchAt: number;
  lastFailure: JwksFailure | undefined;
  inFlight: Promise<JwksDocument> | undefined;
}

/** JWK `kty` and `crv` each JWS algorithm verifies with (RFC 7518 §3, RFC 8037). Symmetric keys are never taken from a URL. */
function keyFits(jwk: JWK, alg: string): boolean {
  if (alg.startsWith('RS') || alg.startsWith('PS')) return jwk.kty === 'RSA';
  if (alg === 'ES256') return jwk.kty === 'EC' && jwk.crv === 'P-256';
  if (alg === 'ES384') return jwk.kty === 'EC' && jwk.crv === 'P-384';
  if (alg === 'ES512') return jwk.kty === 'EC' && jwk.crv === 'P-521';
  if (alg === 'EdDSA') return jwk.kty === 'OKP' && (jwk.crv === 'Ed25519' || jwk.crv === 'Ed448');
  return false;
}

/** Whether the JWK may verify `alg` signatures: its own `use`, `key_ops` and `alg`, when present, allow it. */
function usableFor(jwk: JWK, alg: string): boolean {
  if (jwk.use !== undefined && jwk.use !== 'sig') return false;
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes('verify'))) return false;
  if (jwk.alg !== undefined && jwk.alg !== alg) return false;
  return keyFits(jwk, alg);
}

/** Only the public members: a JWKS that (wrongly) publishes a private key still yields a public key. */
function publicPart(jwk: JWK): JWK {
  const out: JWK = { kty: jwk.kty };
  for (const member of ['crv', 'n', 'e', 'x', 'y'] as const) {
    const value = jwk[member];
    if (typeof value === 'string') out[member] = value;
  }
  return out;
}

export class JwksCache {
  private readonly entries = new RecencyMap<string, UrlEntry>();
  private readonly maxBytes: number;
  private readonly ttlMs: number;
  private readonly minRefreshMs: number;
  private readonly maxUrls: number;
  private readonly now: () => number;

  constructor(private readonly options: JwksCacheOptions) {
    this.maxBytes = options.maxBytes ?? DEFAULT_JWKS_MAX_BYTES;
    this.ttlMs = options.ttlMs ?? DEFAULT_JWKS_TTL_MS;
    this.minRefreshMs = options.minRefreshIntervalMs ?? DEFAULT_JWKS_MIN_REFRESH_MS;
    this.maxUrls = options.maxUrls ?? DEFAULT_JWKS_MAX_URLS;
    this.now = options.now ?? Date.now;
  }

  /** Why this URL will never be fetched, or undefined: for the IdP routes to answer 400 at upsert time. */
  urlProblem(jwksUrl: string): string | undefined {
    let url: URL;
    try {
      url = new URL(jwksUrl);
    } catch {
      return 'jwksUrl is not an absolute URL';
    }
    let dest;
    try {
      dest = destinationOf(url);
    } catch (e) {
      return `jwksUrl: ${(e as Error).message}`;
    }
    const allowed = this.options.allow.some((a) => a.host === dest.host && (a.port === undefined || a.port === dest.port));
    // What can be told without DNS is told when the IdP is saved: an address (or localhost) the egress
    // policy refuses would make every exchange fail later. Names are checked as they resolve, at fetch.
    if (!allowed && (dest.host === 'localhost' || dest.host.endsWith('.localhost')))
      return `jwksUrl: ${dest.host} is a loopback name and not in the allow-list`;
    if (isIP(dest.host) !== 0) {
      const why = refusal(dest, dest.host, this.options.allow);
      if (why !== undefined) return `jwksUrl: ${why}`;
    }
    if (url.protocol === 'https:') return undefined;
    // Plain http only where the operator opened the host (a local IdP, tests): keys must not be
    // swappable on the way.
    return allowed ? undefined : 'jwksUrl must be an https URL';
  }

  /** The key that verifies a token with this header, from the document at `jwksUrl`. Rejects with JwksFailure. */
  async getKey(jwksUrl: string, header: TokenHeader): Promise<VerificationKey> {
    const problem = this.urlProblem(jwksUrl);
    if (problem !== undefined) throw new JwksFailure('url-refused', problem);
    let entry = this.entries.touch(jwksUrl, this.maxUrls / 2);
    if (entry === undefined) {
      entry = { document: undefined, lastFetchAt: -Infinity, lastFailure: undefined, inFlight: undefined };
      this.entries.set(jwksUrl, entry);
      while (this.entries.size > this.maxUrls) this.entries.delete(this.entries.oldestKey() as string);
    }
    let document = entry.document;
    let fetchedForThisCall = false;
    if (document === undefined || this.now() - document.fetchedAt >= this.ttlMs) {
      document = await this.refresh(jwksUrl, entry);
      fetchedForThisCall = true;
    }
    let found = pick(document, header);
    if (
      found.kind === 'none' &&
      !fetchedForThisCall &&
      (entry.inFlight !== undefined || this.now() - entry.lastFetchAt >= this.minRefreshMs)
    ) {
      // A kid (or algorithm) the document lacks: the IdP may have rotated its keys since we fetched.
      document = await this.refresh(jwksUrl, entry);
      found = pick(document, header);
    }
    switch (found.kind) {
      case 'none':
        throw new JwksFailure(
          'no-matching-key',
          header.kid !== undefined
            ? `no key with kid ${JSON.stringify(header.kid.slice(0, 100))} for ${header.alg} in ${jwksUrl}`
            : `no key for ${header.alg} in ${jwksUrl}`,
        );
      case 'several':
        throw new JwksFailure('ambiguous-key', `the token has no kid and ${jwksUrl} has several keys for ${header.alg}`);
      case 'one':
        return this.imported(document, found.index, header.alg, jwksUrl);
    }
  }

  /** Drops what is known about a URL (its IdP was deleted or changed). */
  forget(jwksUrl: string): void {
    this.entries.delete(jwksUrl);
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * The document after a fetch: a fetch in flight is joined; otherwise one starts, unless the last one
   * started less than minRefreshIntervalMs ago: then its failure is rethrown, or its document returned.
   */
  private async refresh(jwksUrl: string, entry: UrlEntry): Promise<JwksDocument> {
    if (entry.inFlight) return entry.inFlight;
    if (this.now() - entry.lastFetchAt < this.minRefreshMs) {
      if (entry.lastFailure) throw entry.lastFailure;
      if (entry.document) return entry.document;
    }
    entry.lastFetchAt = this.now();
    const inFlight = this.fetchDocument(jwksUrl).then(
      (document) => {
        entry.document = document;
        entry.lastFailure = undefined;
        return document;
      },
      (e: unknown) => {
        // (a document fetched earlier stays: tokens whose keys it has keep verifying until it expires)
        entry.lastFailure = e instanceof JwksFailure ? e : new JwksFailure('fetch-failed', `fetching ${jwksUrl} failed`);
        throw entry.lastFailure;
      },
    );
    entry.inFlight = inFlight;
    try {
      return await inFlight;
    } finally {
      if (entry.inFlight === inFlight) entry.inFlight = undefined;
    }
  }

  private async fetchDocument(jwksUrl: string): Promise<JwksDocument> {
    // Checked here as well as in hostFetch (which checks again, and pins what it checked) so that a
    // refused address is told apart from a network failure.
    const dest = destinationOf(new URL(jwksUrl));
    if (isIP(dest.host) === 0) {
      let addresses: ResolvedAddress[];
      try {
        addresses = await (this.options.lookup ?? systemLookup)(dest.host);
      } catch {
        throw new JwksFailure('fetch-failed', `could not resolve ${dest.host} for ${jwksUrl}`);
      }
      for (const a of addresses) {
        const why = isIP(a.address) === 0 ? 'not an address' : refusal(dest, a.address, this.options.allow);
        if (why !== undefined) throw new JwksFailure('url-refused', `${jwksUrl}: ${why}`);
      }
    } else {
      const why = refusal(dest, dest.host, this.options.allow);
      if (why !== undefined) throw new JwksFailure('url-refused', `${jwksUrl}: ${why}`);
    }
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new FetchFailure(`timed out after ${this.options.timeoutMs} ms`)),
      this.options.timeoutMs,
    );
    let response;
    try {
      response = await hostFetch(
        {
          url: jwksUrl,
          method: 'GET',
          headers: [['accept', 'application/jwk-set+json, application/json']],
          body: undefined,
          // A JWKS URL names the document itself; following redirects would let a hop downgrade to http.
          redirect: 'error',
        },
        { allow: this.options.allow, maxResponseBytes: this.maxBytes, ...(this.options.lookup ? { lookup: this.options.lookup } : {}) },
        controller.signal,
      );
    } catch (e) {
      throw new JwksFailure('fetch-failed', `fetching ${jwksUrl} failed: ${e instanceof FetchFailure ? e.message : 'network error'}`);
    } finally {
      clearTimeout(timer);
    }
    if (response.status !== 200) throw new JwksFailure('bad-status', `${jwksUrl} answered ${response.status}`);
    const text = Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength).toString('utf8');
    let parsed: unknown;
    try {
      if (tooDeep(text, MAX_JSON_DEPTH)) throw new Error('too deep');
      parsed = JSON.parse(text);
    } catch {
      throw new JwksFailure('bad-document', `${jwksUrl} did not answer JSON`);
    }
    const keys = typeof parsed === 'object' && parsed !== null ? (parsed as { keys?: unknown }).keys : undefined;
    if (!Array.isArray(keys)) throw new JwksFailure('bad-document', `${jwksUrl} answered JSON without a "keys" array`);
    if (keys.length > MAX_JWKS_KEYS) throw new JwksFailure('bad-document', `${jwksUrl} has more than ${MAX_JWKS_KEYS} keys`);
    const jwks = keys.filter(
      (k): k is JWK => typeof k === 'object' && k !== null && !Array.isArray(k) && typeof (k as JWK).kty === 'string',
    );
    return { keys: jwks, fetchedAt: this.now(), imported: new Map() };
  }

  private imported(document: JwksDocument, index: number, alg: string, jwksUrl: string): Promise<VerificationKey> {
    const id = `${index} ${alg}`;
    let key = document.imported.get(id);
    if (key === undefined) {
      const jwk = publicPart(document.keys[index] as JWK);
      key = jose()
        .then(({ importJWK }) => importJWK(jwk, alg))
        .catch(() => {
          document.imported.delete(id);
          throw new JwksFailure('bad-key', `key ${index} of ${jwksUrl} could not be imported for ${alg}`);
        });
      document.imported.set(id, key);
    }
    return key;
  }
}

type Pick = { kind: 'none' } | { kind: 'several' } | { kind: 'one'; index: number };

function pick(document: JwksDocument, header: TokenHeader): Pick {
  const fits: number[] = [];
  document.keys.forEach((jwk, index) => {
    if ((header.kid === undefined || jwk.kid === header.kid) && usableFor(jwk, header.alg)) fits.push(index);
  });
  // With a kid, a duplicate is the IdP's mistake and its first key is as good a guess as any; without
  // one, only a set with a single key for the algorithm says which key is meant.
  if (fits.length === 0) return { kind: 'none' };
  if (header.kid === undefined && fits.length > 1) return { kind: 'several' };
  return { kind: 'one', index: fits[0] as number };
}
