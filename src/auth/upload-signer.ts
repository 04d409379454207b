import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { fromBase64Url } from '../domain/base64url.js';

/**
 * What a signed provisional token is for. A signed machine version id (`version`) goes back in the
 * finalize path; an upload token (`version-upload`) is the one form field of the unauthenticated code
 * upload. `migration` and `migration-upload` are the same for a provisional migration (wire-protocol
 * §3.3). The kind is signed, so one can never stand in for another.
 */
export type UploadTokenKind = 'version' | 'version-upload' | 'migration' | 'migration-upload';

export interface UploadClaims {
  kind: UploadTokenKind;
  orgId: string;
  machine: string;
  /** The real id the finalized object will have (`ver_...` or `mig_...`). */
  id: string;
  gzip: boolean;
  /** Epoch seconds after which the token is refused. */
  expiresAt: number;
}

type UploadTokenCheck =
  | { ok: true; claims: UploadClaims }
  /** `malformed` and `bad-signature` mean the token is not one this node signed; `expired` that it was, too long ago. */
  | { ok: false; reason: 'malformed' | 'bad-signature' | 'expired'; claims?: UploadClaims };

const VERSION_TAG = 'u1';
const KINDS: readonly UploadTokenKind[] = ['version', 'version-upload', 'migration', 'migration-upload'];

/**
 * Signs and checks provisional ids and upload tokens: `u1.<payload>.<mac>`, where payload is the
 * base64url of a small JSON array and mac the base64url HMAC-SHA256 of `u1.<payload>` under a key
 * derived (HKDF-SHA256) from the node's master key. Every character is URL-safe, so the token goes
 * raw into a path segment (the client does not encode it, wire-protocol §1.1).
 */
export class UploadSigner {
  private readonly key: Buffer;

  constructor(
    masterKey: Buffer,
    /** How long a provisional version may wait for its upload and finalization. */
    readonly ttlSeconds: number,
  ) {
    this.key = Buffer.from(hkdfSync('sha256', masterKey, Buffer.from('statehold'), Buffer.from('provisional upload tokens v1'), 32));
  }

  sign(claims: Omit<UploadClaims, 'expiresAt'> & { expiresAt?: number }, now = Date.now()): string {
    const expiresAt = claims.expiresAt ?? Math.floor(now / 1000) + this.ttlSeconds;
    const payload = Buffer.from(
      JSON.stringify([claims.kind, claims.orgId, claims.machine, claims.id, claims.gzip ? 1 : 0, expiresAt]),
    ).toString('base64url');
    const signingInput = `${VERSION_TAG}.${payload}`;
    return `${signingInput}.${this.mac(signingInput).toString('base64url')}`;
  }

  verify(token: string, now = Date.now()): UploadTokenCheck {
    const parts = token.split('.');
    if (parts.length !== 3 || parts[0] !== VERSION_TAG) return { ok: false, reason: 'malformed' };
    const [tag, payload, mac] = parts as [string, string, string];
    const given = fromBase64Url(mac);
    const expected = this.mac(`${tag}.${payload}`);
    if (!given || given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'bad-signature' };
    const claims = decodeClaims(payload);
    if (!claims) return { ok: false, reason: 'malformed' };
    if (claims.expiresAt * 1000 <= now) return { ok: false, reason: 'expired', claims };
    return { ok: true, claims };
  }

  private mac(signingInput: string): Buffer {
    return createHmac('sha256', this.key).update(signingInput).digest();
  }
}

const decodeClaims = (payload: string): UploadClaims | undefined => {
  const bytes = fromBase64Url(payload);
  if (!bytes) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 6) return undefined;
  const [kind, orgId, machine, id, gzip, expiresAt] = parsed as unknown[];
  if (!KINDS.includes(kind as UploadTokenKind)) return undefined;
  if (typeof orgId !== 'string' || typeof machine !== 'string' || typeof id !== 'string') return undefined;
  if ((gzip !== 0 && gzip !== 1) || typeof expiresAt !== 'number' || !Number.isFinite(expiresAt)) return undefined;
  return { kind: kind as UploadTokenKind, orgId, machine, id, gzip: gzip === 1, expiresAt };
};
