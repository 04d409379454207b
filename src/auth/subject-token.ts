import { createPublicKey, type KeyObject } from 'node:crypto';
import type { errors as joseErrors, JWTHeaderParameters, ProtectedHeaderParameters } from 'jose';
import { tooDeep } from '../domain/json-depth.js';
import { signingAlgorithms } from '../domain/records.js';
import { jose } from './jose-module.js';
import { JwksFailure, type JwksCache, type VerificationKey } from './jwks-cache.js';

/**
 * Verification of the subject token of a token exchange (wire-protocol §3.9 steps 1–2,
 * docs/token-exchange.md "Subject tokens"): which identity provider a token claims to come from, and
 * whether it really does.
 */

/** The algorithms an IdP may list (wire-protocol §3.7); `none` is not one of them. */
const SIGNING_ALGORITHMS = signingAlgorithms;

/** Seconds `exp` and `nbf` may be off by: clocks of IdPs and nodes drift a little, tokens live minutes to hours. */
const CLOCK_TOLERANCE_SECONDS = 5;
/** Longest subject token, in characters; IdP tokens with generous claims are a few KB. */
export const MAX_SUBJECT_TOKEN_CHARS = 32 * 1024;

export interface IdentityProviderVerification {
  aud?: string | undefined;
  iss?: string | undefined;
  algs: readonly string[];
  /** The raw bytes of `key` (wire-protocol §3.7, base64url-decoded): see `staticKey`. */
  key?: Uint8Array | undefined;
  jwksUrl?: string | undefined;
}

/**
 * What went wrong, safe to tell the caller: `malformed` (not a JWT, too large or too deep),
 * `algorithm` (alg not among the IdP's algs, `none`, or a `crit` header), `signature` (no key of the
 * IdP verifies it: wrong key, unknown kid, a key of another type than alg), `claims` (aud, iss, exp
 * missing or of the wrong type), `expired`, `not-yet-valid` (nbf), `key-unavailable` (the IdP's key
 * cannot be had: its JWKS unreachable or broken, or its configured key unusable; not the caller's doing).
 */
export type RefusalCategory = 'malformed' | 'algorithm' | 'signature' | 'claims' | 'expired' | 'not-yet-valid' | 'key-unavailable';

const CLIENT_MESSAGES: Record<RefusalCategory, string> = {
  malformed: 'the subject token is not a valid JWT',
  algorithm: 'the subject token is signed with an algorithm the identity provider does not allow',
  signature: 'the subject token signature does not verify',
  claims: 'the subject token claims are not acceptable to the identity provider',
  expired: 'the subject token has expired',
  'not-yet-valid': 'the subject token is not valid yet',
  'key-unavailable': 'the identity provider verification key is not available',
};

/**
 * A subject token that does not verify. `message` (the internal reason) is for logs: it may name the
 * IdP's JWKS URL or the failing claim, never a key or the token. `clientMessage` may be sent back.
 */
export class SubjectTokenRefused extends Error {
  constructor(
    readonly category: RefusalCategory,
    reason: string,
  ) {
    super(reason);
    this.name = 'SubjectTokenRefused';
  }

  get clientMessage(): string {
    return CLIENT_MESSAGES[this.category];
  }
}

/** The claims of a token, unverified: only to choose the IdP that will verify it. Throws SubjectTokenRefused (`malformed`). */
export async function unverifiedClaims(token: string): Promise<Record<string, unknown>> {
  checkShape(token);
  const { decodeJwt } = await jose();
  try {
    return decodeJwt(token) as Record<string, unknown>;
  } catch (e) {
    throw new SubjectTokenRefused('malformed', `the subject token does not decode: ${(e as Error).message}`);
  }
}

/**
 * Whether a token with these (unverified) claims is one the IdP is configured for: every configured
 * side equals the token's (`aud` may be an array that contains it); a side left blank matches
 * anything, but an IdP with neither side matches nothing.
 */
export function idpMatches(idp: { aud?: string | undefined; iss?: string | undefined }, claims: Record<string, unknown>): boolean {
  if (idp.aud === undefined && idp.iss === undefined) return false;
  if (idp.iss !== undefined && claims.iss !== idp.iss) return false;
  if (idp.aud !== undefined) {
    const aud = claims.aud;
    if (!(aud === idp.aud || (Array.isArray(aud) && aud.includes(idp.aud)))) return false;
  }
  return true;
}

/**
 * The IdP to verify a token with: among those that match, one configuring both `aud` and `iss` before
 * one configuring a single side (the more specific configuration is the one meant), else the first.
 */
export function pickIdp<T extends { aud?: string | undefined; iss?: string | undefined }>(
  idps: Iterable<T>,
  claims: Record<string, unknown>,
): T | undefined {
  let best: T | undefined;
  for (const idp of idps) {
    if (!idpMatches(idp, claims)) continue;
    if (idp.aud !== undefined && idp.iss !== undefined) return idp;
    best ??= idp;
  }
  return best;
}

const isHmac = (alg: string): boolean => alg.startsWith('HS');

type StaticKey = { kind: 'secret'; secret: Uint8Array } | { kind: 'public'; key: KeyObject } | { kind: 'unusable'; why: string };

/**
 * What the configured `key` bytes are. A public key is recognised by its form (PEM, whether SPKI,
 * PKCS#1 or an X.509 certificate; DER SPKI; a JWK as JSON); anything else is an HMAC secret, used
 * byte for byte (the anonymous IdP's key is the org ID's UTF-8 bytes, wire-protocol §4.2). The form
 * decides which algorithms the key serves, never the token: a public key's bytes used as an HMAC
 * secret would let anyone who has the public key sign (the classic RS256→HS256 confusion).
 */
function staticKey(bytes: Uint8Array): StaticKey {
  if (bytes.byteLength === 0) return { kind: 'unusable', why: 'the key is empty' };
  const text = Buffer.from(bytes).toString('utf8').trim();
  if (text.startsWith('-----BEGIN')) {
    try {
      // (from a private key PEM, node derives the public key: only verification ever happens here)
      return { kind: 'public', key: createPublicKey(text) };
    } catch {
      return { kind: 'unusable', why: 'the key looks like PEM but is not a public key, private key or certificate' };
    }
  }
  if (text.startsWith('{')) {
    let jwk: unknown;
    try {
      jwk = JSON.parse(text);
    } catch {
      jwk = undefined;
    }
    if (typeof jwk === 'object' && jwk !== null && typeof (jwk as { kty?: unknown }).kty === 'string') {
      const { kty, k, crv, n, e, x, y } = jwk as Record<string, unknown>;
      if (kty === 'oct') {
        return typeof k === 'string' && k !== ''
          ? { kind: 'secret', secret: Buffer.from(k, 'base64url') }
          : { kind: 'unusable', why: 'the oct JWK has no k' };
      }
      try {
        const publicJwk = Object.fromEntries(Object.entries({ kty, crv, n, e, x, y }).filter(([, v]) => typeof v === 'string'));
        return { kind: 'public', key: createPublicKey({ key: publicJwk, format: 'jwk' }) };
      } catch {
        return { kind: 'unusable', why: `the ${String(kty)} JWK is not a valid public key` };
      }
    }
  }
  if (bytes[0] === 0x30) {
    try {
      return { kind: 'public', key: createPublicKey({ key: Buffer.from(bytes), format: 'der', type: 'spki' }) };
    } catch {
      // (a secret that happens to start with the byte of an ASN.1 SEQUENCE)
    }
  }
  return { kind: 'secret', secret: bytes };
}

/** Why `key`/`jwksUrl`/`algs` cannot verify anything, or undefined: for the IdP routes to answer 400 at upsert time. */
export function idpKeyProblem(idp: IdentityProviderVerification): string | undefined {
  if (idp.algs.length === 0) return 'algs must list at least one algorithm';
  const unknown = idp.algs.find((a) => !(SIGNING_ALGORITHMS as readonly string[]).includes(a));
  if (unknown !== undefined) return `unsupported algorithm ${JSON.stringify(unknown)}`;
  if ((idp.key === undefined) === (idp.jwksUrl === undefined)) return 'exactly one of key and jwksUrl is required';
  if (idp.jwksUrl !== undefined) {
    if (idp.algs.some(isHmac)) return 'HS256, HS384 and HS512 need a key: a JWKS URL publishes public keys';
    return undefined;
  }
  const key = staticKey(idp.key as Uint8Array);
  if (key.kind === 'unusable') return key.why;
  if (key.kind === 'secret' && idp.algs.some((a) => !isHmac(a)))
    return 'the key is an HMAC secret, so algs may list only HS256, HS384 and HS512 (give a public key as PEM, DER SPKI or JWK for the others)';
  if (key.kind === 'public' && idp.algs.some(isHmac)) return 'the key is a public key, so algs may not list HS256, HS384 or HS512';
  return undefined;
}

function checkShape(token: string): void {
  if (token.length > MAX_SUBJECT_TOKEN_CHARS)
    throw new SubjectTokenRefused('malformed', `the subject token is longer than ${MAX_SUBJECT_TOKEN_CHARS} characters`);
  const parts = token.split('.');
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]*$/.test(p)))
    throw new SubjectTokenRefused('malformed', 'the subject token is not a compact JWS');
  // Claims go on through mappings into minted tokens: no deeper than any other JSON we take in.
  if (tooDeep(Buffer.from(parts[1] as string, 'base64url').toString('utf8')))
    throw new SubjectTokenRefused('malformed', 'the subject token claims nest too deeply');
}

/** The key for this token from the IdP's configuration. */
async function keyFor(idp: IdentityProviderVerification, header: JWTHeaderParameters, jwks: JwksCache): Promise<VerificationKey> {
  if (idp.jwksUrl !== undefined) {
    if (isHmac(header.alg)) throw new SubjectTokenRefused('algorithm', `${header.alg} cannot be verified with a JWKS`);
    try {
      return await jwks.getKey(idp.jwksUrl, { alg: header.alg, kid: typeof header.kid === 'string' ? header.kid : undefined });
    } catch (e) {
      if (e instanceof JwksFailure) {
        const category = e.code === 'no-matching-key' || e.code === 'ambiguous-key' ? 'signature' : 'key-unavailable';
        throw new SubjectTokenRefused(category, e.message);
      }
      throw e;
    }
  }
  if (idp.key === undefined) throw new SubjectTokenRefused('key-unavailable', 'the identity provider has neither key nor jwksUrl');
  // Not cached: parsing a PEM costs tens of microseconds, and an exchange is rarer than a request.
  const key = staticKey(idp.key);
  if (key.kind === 'unusable') throw new SubjectTokenRefused('key-unavailable', key.why);
  if (key.kind === 'secret' && !isHmac(header.alg))
    throw new SubjectTokenRefused('signature', `the identity provider has an HMAC secret; the token is signed ${header.alg}`);
  if (key.kind === 'public' && isHmac(header.alg))
    throw new SubjectTokenRefused('signature', `the identity provider has a public key; the token is signed ${header.alg}`);
  return key.kind === 'secret' ? key.secret : key.key;
}

/**
 * Verifies a subject token against an IdP: signature by the IdP's key or JWKS with one of its
 * algorithms; `aud` and `iss` when the IdP configures them; `exp` required and not passed, `nbf` (when
 * present) passed, both within CLOCK_TOLERANCE_SECONDS. Resolves with the claims; rejects with
 * SubjectTokenRefused.
 */
export async function verifySubjectToken(
  token: string,
  idp: IdentityProviderVerification,
  jwks: JwksCache,
  nowSeconds?: number,
): Promise<Record<string, unknown>> {
  checkShape(token);
  const { decodeProtectedHeader, errors, jwtVerify } = await jose();
  let header: ProtectedHeaderParameters;
  try {
    header = decodeProtectedHeader(token);
  } catch (e) {
    throw new SubjectTokenRefused('malformed', `the subject token header does not decode: ${(e as Error).message}`);
  }
  // No IdP token needs a critical extension, and one we accepted would be one we did not understand.
  if (header.crit !== undefined) throw new SubjectTokenRefused('algorithm', 'the subject token has a crit header');
  const algorithms = idp.algs.filter((a) => (SIGNING_ALGORITHMS as readonly string[]).includes(a));
  if (algorithms.length === 0) throw new SubjectTokenRefused('key-unavailable', 'the identity provider lists no supported algorithm');
  try {
    const { payload } = await jwtVerify(token, (header) => keyFor(idp, header, jwks), {
      algorithms,
      ...(idp.aud !== undefined ? { audience: idp.aud } : {}),
      ...(idp.iss !== undefined ? { issuer: idp.iss } : {}),
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ['exp'],
      ...(nowSeconds !== undefined ? { currentDate: new Date(nowSeconds * 1000) } : {}),
    });
    return payload as Record<string, unknown>;
  } catch (e) {
    throw refusalOf(e, errors);
  }
}

/** jose's failures as refusals; the reason is jose's message, which names claims, never values. */
function refusalOf(e: unknown, errors: typeof joseErrors): SubjectTokenRefused {
  if (e instanceof SubjectTokenRefused) return e;
  if (e instanceof errors.JWTExpired) return new SubjectTokenRefused('expired', e.message);
  if (e instanceof errors.JWTClaimValidationFailed) {
    return new SubjectTokenRefused(e.claim === 'nbf' && e.reason === 'check_failed' ? 'not-yet-valid' : 'claims', e.message);
  }
  if (e instanceof errors.JOSEAlgNotAllowed) return new SubjectTokenRefused('algorithm', e.message);
  if (e instanceof errors.JWSSignatureVerificationFailed) return new SubjectTokenRefused('signature', e.message);
  if (e instanceof errors.JOSENotSupported) return new SubjectTokenRefused('algorithm', e.message);
  if (e instanceof errors.JWSInvalid || e instanceof errors.JWTInvalid) return new SubjectTokenRefused('malformed', e.message);
  // jose throws TypeError when the key does not suit the algorithm (an RSA key for ES256, a P-384 key for ES256).
  if (e instanceof TypeError) return new SubjectTokenRefused('signature', `the key does not suit the token's algorithm: ${e.message}`);
  return new SubjectTokenRefused('key-unavailable', `verification failed unexpectedly: ${e instanceof Error ? e.name : typeof e}`);
}
