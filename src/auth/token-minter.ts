import { createHmac } from 'node:crypto';

/**
 * Signs State Backed tokens for token exchange (wire-protocol §2.2, §3.9): HS256, `kid` the token
 * provider's key, `act` the mapped claims, the fixed State Backed audience.
 *
 * The payload is written so that its base64url holds no `-` or `_`. The real client reads `exp` with
 * `atob(token.split(".")[1])`, and `atob` throws on those two characters (wire-protocol §10.6): a
 * client that cannot read `exp` never refreshes, and breaks once the token expires. For JSON made only
 * of ASCII, the only base64 sextets 62 and 63 (`-`, `_`) come from a third byte of a group whose low
 * six bits are all or all-but-one set: `>`, `?`, `~` and DEL. Those, and every non-ASCII character,
 * can appear only inside JSON strings, where they are written as `\uXXXX` escapes instead, which
 * decode to the same claims.
 */
export const mintStateBackedToken = (
  key: { id: string; secret: Buffer },
  claims: { act: Record<string, unknown>; aud: string; iss: string; iat: number; exp: number },
): string => {
  const header = Buffer.from(JSON.stringify({ alg: 'HS256', kid: key.id, typ: 'JWT' }), 'utf8').toString('base64url');
  const payload = Buffer.from(atobSafeJson(claims), 'ascii').toString('base64url');
  const signature = createHmac('sha256', key.secret).update(`${header}.${payload}`).digest('base64url');
  return `${header}.${payload}.${signature}`;
};

/** JSON.stringify, with every character that could put `-` or `_` into its base64 escaped. */
const atobSafeJson = (value: unknown): string =>
  JSON.stringify(value).replace(/[>?~\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
