import { isUtf8 } from 'node:buffer';
import { invalidParameter, ServiceError } from '../domain/errors.js';
import { MAX_JSON_DEPTH, tooDeep } from '../domain/json-depth.js';

/** A request as routes see it: read fully off uWS before any route code runs. */
export interface ApiRequest {
  method: string;
  path: string;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  body: Buffer;
  /** The peer's address as text (a proxy's, behind one); for per-client limits. */
  remoteAddress: string;
}

export interface ApiResponse {
  status: number;
  /** Serialised as JSON; absent means no body (use only with 201/204, wire-protocol §1.3). */
  body?: unknown;
  headers?: Record<string, string>;
  /** A raw body with its own content type, for the few non-JSON answers. */
  raw?: { contentType: string; data: string | Buffer };
}

export const json = (body: unknown, status = 200): ApiResponse => ({ status, body });
export const noContent = (status: 201 | 204 = 204): ApiResponse => ({ status });

/**
 * The JSON body, whatever the content type says (smply sends none, the client sends JSON on GETs).
 * An empty body reads as `{}`; anything else that is not a JSON object is a 400.
 */
export const jsonBody = (request: ApiRequest): Record<string, unknown> => {
  const encoding = request.headers['content-encoding']?.trim().toLowerCase();
  if (encoding && encoding !== 'identity' && request.body.length > 0) {
    throw invalidParameter(
      'content-encoding',
      `the request body is read as sent: content-encoding ${encoding.slice(0, 64)} is not supported; send the JSON uncompressed`,
    );
  }
  // Decoding would turn invalid bytes into U+FFFD, and the text stored would not be the text sent.
  if (!isUtf8(request.body)) throw invalidParameter('body', 'the request body is not valid UTF-8');
  const text = request.body.toString('utf8').trim();
  if (text === '') return {};
  if (tooDeep(text)) throw invalidParameter('body', `the request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep`);
  let parsed: unknown;
  try {
    // The reviver costs a second walk: only when the text could name __proto__ (escapes included) or
    // hold a number beyond a double's range (MAYBE_OUT_OF_RANGE).
    parsed =
      text.includes('__proto__') || text.includes('\\u') || MAYBE_OUT_OF_RANGE.test(text)
        ? JSON.parse(text, refuseUnkept)
        : JSON.parse(text);
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw invalidParameter('body', `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalidParameter('body', 'the request body must be a JSON object');
  }
  return parsed as Record<string, unknown>;
};

/**
 * A number past a double's range has an exponent of three digits, or an integer part of 210 digits at
 * least (JSON has no leading zeros; 209 digits times 10^99 is still in range). The lookbehinds keep the
 * scan linear (a run of digits is tried once, from its first digit, not from each of them) and, with
 * the lookahead, leave out what only looks like an exponent inside a word: a UUID or hex hash in a
 * string (`550e8400-…`), which would otherwise send many ordinary bodies through the slower reviver.
 */
const MAYBE_OUT_OF_RANGE = /(?<![\w.-])-?\d+(?:\.\d+)?[eE][+-]?\d{3}(?![\w.-])|(?<!\d)\d{210}/;

/**
 * What a body may not hold:
 * - a key named __proto__: copied with plain assignment (Object.assign; a spread into an object literal
 *   is fine) it sets the prototype instead, which let a create's context inherit properties its
 *   authorizer never saw;
 * - a number JSON.parse reads as ±Infinity (`1e400`): it reaches the machine and storage as JSON, which
 *   has no Infinity, so the value sent would become null without a word.
 */
function refuseUnkept(this: unknown, key: string, value: unknown): unknown {
  if (key === '__proto__') throw invalidParameter('body', 'the request body has a key named __proto__, which is not allowed');
  if (typeof value === 'number' && !Number.isFinite(value))
    throw invalidParameter(
      'body',
      `the request body has a number beyond the range of a double${key === '' ? '' : ` (at key ${JSON.stringify(key.slice(0, 64))})`}`,
    );
  return value;
}
