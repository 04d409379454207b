/**
 * The only host functions handed to an isolate. Each takes and returns primitives (ivm.Callback copies
 * them), validates its input and never throws into the isolate:
 * - random bytes (hex) for crypto.getRandomValues / randomUUID;
 * - the console sink, which stamps the entry with the host clock and the version id, and enforces the
 *   per-call console budget (LogBudget) again on the host side;
 * - crypto.subtle's digest/HMAC (bytes in, an ArrayBuffer copy or an error message out);
 * - fetch's starter: takes the calling actor's key, a JSON request head and the body bytes, hands a
 *   validated HostFetchRequest to the isolate's HostCalls (version-isolate.ts) and answers a JSON
 *   string at once; the response is delivered later by a host → isolate call, never by this callback.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import ivm from 'isolated-vm';
import { tooDeep } from '../domain/json-depth.js';
import type { HostFetchRequest } from './host-fetch.js';
import type { CapturedLog, LogLevel } from './types.js';
import { MAX_LOG_CHARS_PER_CALL, MAX_LOG_ENTRIES_PER_CALL } from './limits.js';

const LEVELS: ReadonlySet<string> = new Set(['log', 'info', 'warn', 'error', 'debug']);
const MAX_RANDOM_BYTES = 65536;

export function randomCallback(): ivm.Callback {
  return new ivm.Callback((n: unknown): string => {
    const count = typeof n === 'number' && Number.isInteger(n) && n > 0 ? Math.min(n, MAX_RANDOM_BYTES) : 0;
    return randomBytes(count).toString('hex');
  });
}

/** Parses one entry sent by the in-isolate console; anything malformed is dropped. */
export function parseLogEntry(json: unknown, versionId: string, now: number): CapturedLog | undefined {
  if (typeof json !== 'string') return undefined;
  // The in-isolate console cuts values off at depth 8, but it shares the isolate with machine code:
  // an entry deeper than the node's channels can carry is refused here too.
  if (tooDeep(json)) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (raw === null || typeof raw !== 'object') return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.level !== 'string' || !LEVELS.has(r.level) || !Array.isArray(r.args)) return undefined;
  const entry: CapturedLog = { level: r.level as LogLevel, args: r.args, timestamp: now, versionId };
  if (typeof r.instanceKey === 'string') entry.instanceKey = r.instanceKey;
  if (typeof r.machineInstanceName === 'string') entry.machineInstanceName = r.machineInstanceName;
  return entry;
}

/**
 * The console budget of one call into the isolate, counted on the host (limits.ts). The in-isolate
 * emitter enforces the same budget (dropping without a crossing, after signalling its first drop of
 * a call with a number), but its code shares the isolate with machine code, so the host does not
 * rely on it. The VersionIsolate opens a window around each crossing (`begin`/`end`; nested windows,
 * e.g. a fetch outcome delivered during a step, merge into one); past the budget the rest of the
 * window's entries are dropped and `end` writes ONE summary entry, "console output truncated: N
 * entries dropped", N counting the host's drops and those the isolate reports (`countIsolateDrops`).
 */
export class LogBudget {
  /** Asks the isolate how many entries it dropped (set once the harness is loaded); 0 if it cannot. */
  countIsolateDrops: (() => number) | undefined;
  private depth = 0;
  private entries = 0;
  private chars = 0;
  private dropped = 0;
  private isolateDropped = false;
  private truncated = false;
  private instanceKey: string | undefined;
  private machineInstanceName: string | undefined;

  constructor(
    private readonly versionId: string,
    private readonly onLog: ((e: CapturedLog) => void) | undefined,
  ) {}

  begin(): void {
    // (a summary still owed for entries that arrived outside any window is written first)
    if (this.depth++ === 0) this.flush();
  }

  end(): void {
    if (this.depth === 0) return;
    if (--this.depth === 0) this.flush();
  }

  /** What the in-isolate console sent: an entry's JSON, or a number (that entry was dropped there). */
  receive(message: unknown): void {
    if (typeof message !== 'string') {
      this.truncated = true;
      this.isolateDropped = true;
      return;
    }
    if (this.truncated || this.entries >= MAX_LOG_ENTRIES_PER_CALL || this.chars + message.length > MAX_LOG_CHARS_PER_CALL) {
      this.drop();
      return;
    }
    const entry = parseLogEntry(message, this.versionId, Date.now());
    if (!entry) return;
    this.entries++;
    this.chars += message.length;
    this.instanceKey = entry.instanceKey;
    this.machineInstanceName = entry.machineInstanceName;
    this.deliver(entry);
  }

  private drop(): void {
    this.truncated = true;
    this.dropped++;
  }

  private flush(): void {
    if (this.isolateDropped) {
      let n = 0;
      try {
        n = this.countIsolateDrops?.() ?? 0;
      } catch {
        // the isolate is gone or stuck: at least one entry was dropped there
      }
      this.dropped += Number.isSafeInteger(n) && n > 0 ? n : 1;
    }
    if (this.dropped > 0) {
      const entry: CapturedLog = {
        level: 'warn',
        args: [`console output truncated: ${this.dropped} entries dropped`],
        timestamp: Date.now(),
        versionId: this.versionId,
      };
      if (this.instanceKey !== undefined) entry.instanceKey = this.instanceKey;
      if (this.machineInstanceName !== undefined) entry.machineInstanceName = this.machineInstanceName;
      this.deliver(entry);
    }
    this.clear();
  }

  private clear(): void {
    this.entries = 0;
    this.chars = 0;
    this.dropped = 0;
    this.isolateDropped = false;
    this.truncated = false;
    this.instanceKey = undefined;
    this.machineInstanceName = undefined;
  }

  private deliver(entry: CapturedLog): void {
    if (!this.onLog) return;
    try {
      this.onLog(entry);
    } catch {
      // a failing log sink must not turn into an exception inside machine code
    }
  }
}

/** The console sink handed to the isolate; entries go through `budget` (which owns the onLog sink). */
export function logCallback(budget: LogBudget): ivm.Callback {
  return new ivm.Callback((message: unknown): void => {
    try {
      budget.receive(message);
    } catch {
      // never throw into the isolate
    }
  });
}

const HASHES: Record<string, string> = { 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
const MAX_CRYPTO_BYTES = 32 * 1024 * 1024;

const toArrayBuffer = (b: Uint8Array): ArrayBuffer => {
  const out = new ArrayBuffer(b.byteLength);
  new Uint8Array(out).set(b);
  return out;
};

/** Computes one digest or HMAC; answers an ArrayBuffer, or a string naming what was wrong. */
function cryptoOperation(op: unknown, hash: unknown, data: unknown, key: unknown, signature: unknown): ArrayBuffer | string {
  const algorithm = typeof hash === 'string' ? HASHES[hash] : undefined;
  if (algorithm === undefined) return 'unsupported hash';
  if (!(data instanceof Uint8Array) || data.byteLength > MAX_CRYPTO_BYTES) return `data must be at most ${MAX_CRYPTO_BYTES} bytes`;
  if (op === 'digest') return toArrayBuffer(createHash(algorithm).update(data).digest());
  if (!(key instanceof Uint8Array) || key.byteLength === 0 || key.byteLength > 65536) return 'invalid HMAC key';
  const mac = createHmac(algorithm, key).update(data).digest();
  if (op === 'hmac') return toArrayBuffer(mac);
  if (op === 'hmac-verify') {
    if (!(signature instanceof Uint8Array)) return 'invalid signature';
    const ok = signature.byteLength === mac.byteLength && timingSafeEqual(signature, mac);
    return toArrayBuffer(new Uint8Array([ok ? 1 : 0]));
  }
  return 'unsupported operation';
}

export function cryptoCallback(): ivm.Callback {
  return new ivm.Callback((op: unknown, hash: unknown, data: unknown, key: unknown, signature: unknown): ArrayBuffer | string => {
    try {
      return cryptoOperation(op, hash, data, key, signature);
    } catch {
      return 'the operation failed';
    }
  });
}

/** Parses what the in-isolate fetch sends; a string is the reason it was refused. */
function parseFetchRequest(headJson: unknown, body: unknown): HostFetchRequest | string {
  if (typeof headJson !== 'string' || headJson.length > 1024 * 1024) return 'invalid request';
  let raw: unknown;
  try {
    raw = JSON.parse(headJson);
  } catch {
    return 'invalid request';
  }
  if (raw === null || typeof raw !== 'object') return 'invalid request';
  const r = raw as Record<string, unknown>;
  if (typeof r.url !== 'string' || typeof r.method !== 'string' || !Array.isArray(r.headers)) return 'invalid request';
  const headers: [string, string][] = [];
  for (const h of r.headers as unknown[]) {
    if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== 'string' || typeof h[1] !== 'string') return 'invalid header';
    headers.push([h[0], h[1]]);
  }
  if (headers.length > 256) return 'too many request headers';
  const redirect = r.redirect === 'error' || r.redirect === 'manual' ? r.redirect : 'follow';
  if (body !== undefined && !(body instanceof Uint8Array)) return 'invalid request body';
  return { url: r.url, method: r.method, headers, body: body === undefined ? undefined : new Uint8Array(body), redirect };
}

/** What the isolate's host-call table answers when asked to start a fetch. */
export type FetchStart = (owner: string | null, request: HostFetchRequest) => { id: number } | { error: string };

export function fetchCallback(start: FetchStart): ivm.Callback {
  return new ivm.Callback((owner: unknown, headJson: unknown, body: unknown): string => {
    try {
      const request = parseFetchRequest(headJson, body);
      if (typeof request === 'string') return JSON.stringify({ error: request });
      return JSON.stringify(start(typeof owner === 'string' ? owner : null, request));
    } catch {
      return JSON.stringify({ error: 'the request could not be started' });
    }
  });
}
