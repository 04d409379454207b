import { createHmac, timingSafeEqual } from 'node:crypto';
import { fromBase64Url } from '../domain/base64url.js';
import { MAX_JSON_DEPTH, tooDeep } from '../domain/json-depth.js';

/**
 * HS256 JWT verification with node:crypto (≈ 6 µs a token here, against ≈ 20 µs for jose 5 and
 * 130–200 µs for jose 6). Only the compact form with `alg: HS256` is accepted; everything else is
 * refused before any key is looked up.
 */
interface JwtParts {
  header: { alg?: unknown; kid?: unknown; [k: string]: unknown };
  payload: Record<string, unknown>;
  signingInput: string;
  signature: Buffer;
}

type JwtDecodeResult = { ok: true; parts: JwtParts } | { ok: false; reason: string };

const segmentPattern = /^[A-Za-z0-9_-]+$/;
/** The signature of a token whose signature text is not canonical base64url: it never verifies. */
const NOT_CANONICAL = Buffer.alloc(0);

export const decodeJwt = (token: string): JwtDecodeResult => {
  const segments = token.split('.');
  if (segments.length !== 3) return { ok: false, reason: 'the bearer token is not a JWT' };
  const [h, p, s] = segments as [string, string, string];
  if (!segmentPattern.test(h) || !segmentPattern.test(p) || !/^[A-Za-z0-9_-]*$/.test(s)) {
    return { ok: false, reason: 'the bearer token is not a JWT' };
  }
  const header = parseJsonObject(h);
  const payload = parseJsonObject(p);
  if (header === TOO_DEEP || payload === TOO_DEEP)
    return { ok: false, reason: `the bearer token's claims nest objects and arrays more than ${MAX_JSON_DEPTH} levels deep` };
  if (!header || !payload) return { ok: false, reason: 'the bearer token is not a JWT' };
  return { ok: true, parts: { header, payload, signingInput: `${h}.${p}`, signature: fromBase64Url(s) ?? NOT_CANONICAL } };
};

export const hasValidHs256Signature = (parts: JwtParts, secret: Buffer): boolean => {
  const expected = createHmac('sha256', secret).update(parts.signingInput).digest();
  return expected.length === parts.signature.length && timingSafeEqual(expected, parts.signature);
};

const TOO_DEEP = Symbol('too deep');

const parseJsonObject = (segment: string): Record<string, unknown> | undefined | typeof TOO_DEEP => {
  try {
    const text = Buffer.from(segment, 'base64url').toString('utf8');
    // Claims reach the machine's authorizers as authContext: no deeper than any other JSON we take in.
    if (tooDeep(text)) return TOO_DEEP;
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};
