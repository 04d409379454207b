import { invalidParameter, missingOrg, specifyOrg, unauthorized } from '../domain/errors.js';
import { isPrettyId } from '../domain/ids.js';
import { MAX_JSON_DEPTH, tooDeep } from '../domain/json-depth.js';
import { clipped } from '../domain/names.js';
import type { Catalog } from '../store/catalog.js';
import type { AdminCredential } from './admin-credential.js';
import { type Caller, requireScope } from './caller.js';
import { decodeJwt, hasValidHs256Signature } from './hs256-jwt.js';
import type { KeyRing } from './key-ring.js';
import { VerifiedTokenCache } from './verified-token-cache.js';

/** The audience `@statebacked/token` hard-codes, whatever host the client talks to (wire-protocol §2.2). */
export const STATEBACKED_AUDIENCE = 'https://api.statebacked.dev/';

/**
 * Seconds past `exp` (and before `nbf`) a token still passes. The real client refreshes a token only
 * once `exp` is a second behind it (wire-protocol §10.6), so without this a request sent in that
 * second fails; it also absorbs a little clock drift between the client and the nodes.
 */
const CLOCK_LEEWAY_SECONDS = 2;

/**
 * A token without `exp` (the interface spec makes expiry optional) is cached for at most this long,
 * so its signature and claims are still checked again now and then; deleting its key ends it at once.
 */
const NO_EXPIRY_CACHE_MS = 5 * 60_000;

interface CredentialHeaders {
  authorization: string | undefined;
  orgId: string | undefined;
  act: string | undefined;
}

interface AuthenticatorOptions {
  catalog: Catalog;
  keyRing: KeyRing;
  adminCredential: AdminCredential;
  /** `<public-url>/`, accepted as `aud` beside the State Backed audience (known once the node listens). */
  ownAudience: () => string;
  now?: () => number;
}

/**
 * Turns request credentials into a `Caller` (wire-protocol §2). Every failure is a 403, never a 401,
 * because the State Backed client maps only 403 to its `UnauthorizedError`.
 */
export class Authenticator {
  private readonly cache = new VerifiedTokenCache();
  private readonly keyListeners: Array<() => void> = [];
  private readonly now: () => number;

  constructor(private readonly options: AuthenticatorOptions) {
    this.now = options.now ?? Date.now;
  }

  authenticate(headers: CredentialHeaders): Caller {
    const bearer = parseBearer(headers.authorization);
    const requestedOrgId = headers.orgId || undefined;
    const caller: Caller = bearer.includes('.') ? this.verifyKeyToken(bearer, requestedOrgId) : this.verifyOperator(bearer, requestedOrgId);
    return headers.act === undefined ? caller : impersonate(caller, headers.act);
  }

  /** Tokens of a deleted key stop working at once. */
  forgetKey(keyId: string): void {
    this.options.keyRing.forget(keyId);
    this.cache.forgetKey(keyId);
    this.keysChanged();
  }

  /** Tells those who hold on to verified credentials (realtime subscriptions) that keys were removed. */
  keysChanged(): void {
    for (const listener of this.keyListeners) listener();
  }

  /** `listener` is called whenever keys were removed through this node. */
  onKeysChanged(listener: () => void): void {
    this.keyListeners.push(listener);
  }

  /**
   * The org a call acts in. A key token is bound to its key's org; the operator names one with
   * `x-statebacked-org-id`, or may leave it out while only one org exists.
   */
  resolveOrg(caller: Caller): string {
    if (caller.kind === 'key') {
      if (caller.requestedOrgId !== undefined && caller.requestedOrgId !== caller.orgId) {
        throw missingOrg('this token belongs to a different org than x-statebacked-org-id names');
      }
      return caller.orgId;
    }
    if (caller.requestedOrgId !== undefined) {
      if (!isPrettyId(caller.requestedOrgId, 'org') || !this.options.catalog.getOrg(caller.requestedOrgId)) {
        throw missingOrg(`org ${clipped(caller.requestedOrgId)} does not exist`);
      }
      return caller.requestedOrgId;
    }
    const orgs = this.options.catalog.listOrgs();
    if (orgs.length === 1 && orgs[0]) return orgs[0].id;
    if (orgs.length === 0) throw missingOrg('no org exists yet: create one with POST /orgs');
    throw specifyOrg();
  }

  private verifyOperator(bearer: string, requestedOrgId: string | undefined): Caller {
    if (!this.options.adminCredential.matches(bearer)) throw unauthorized('invalid credentials');
    return { kind: 'operator', authContext: {}, requestedOrgId };
  }

  private verifyKeyToken(token: string, requestedOrgId: string | undefined): Caller {
    const nowMs = this.now();
    const cached = this.cache.get(token, nowMs);
    if (cached) {
      const key = this.options.keyRing.find(cached.keyId);
      if (key) return { kind: 'key', keyId: key.id, orgId: key.orgId, scopes: key.scopes, authContext: cached.authContext, requestedOrgId };
    }
    const decoded = decodeJwt(token);
    if (!decoded.ok) throw unauthorized(decoded.reason);
    const { header, payload } = decoded.parts;
    if (header.alg !== 'HS256') throw unauthorized('only HS256 tokens are accepted');
    if (header.crit !== undefined) throw unauthorized('the token names critical header extensions this service does not support');
    if (typeof header.kid !== 'string') throw unauthorized('the token names no key (kid)');
    const key = isPrettyId(header.kid, 'sbk') ? this.options.keyRing.find(header.kid) : undefined;
    if (!key) throw unauthorized('the token was signed by an unknown or deleted key');
    if (!hasValidHs256Signature(decoded.parts, key.secret)) throw unauthorized('invalid token signature');

    const nowSeconds = nowMs / 1000;
    // Expiry is optional (interface spec, Authentication 4: "optional standard claims such as ... expiry"):
    // a token without exp works until its key is deleted. @statebacked/token and our token exchange set it.
    const exp = secondsClaim(payload, 'exp');
    const nbf = secondsClaim(payload, 'nbf');
    if (exp !== undefined && exp + CLOCK_LEEWAY_SECONDS <= nowSeconds) throw unauthorized('the token has expired');
    if (nbf !== undefined && nbf > nowSeconds + CLOCK_LEEWAY_SECONDS) throw unauthorized('the token is not valid yet');
    if (!audienceAccepted(payload.aud, this.options.ownAudience())) throw unauthorized('the token is not meant for this service (aud)');

    const authContext = authContextOf(payload);
    const expiresAtMs = exp === undefined ? nowMs + NO_EXPIRY_CACHE_MS : (exp + CLOCK_LEEWAY_SECONDS) * 1000;
    this.cache.set(token, { keyId: key.id, expiresAtMs, authContext });
    return { kind: 'key', keyId: key.id, orgId: key.orgId, scopes: key.scopes, authContext, requestedOrgId };
  }
}

const parseBearer = (authorization: string | undefined): string => {
  if (!authorization) throw unauthorized('missing Authorization: Bearer <token> header');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match?.[1]) throw unauthorized('the Authorization header must be "Bearer <token>"');
  return match[1];
};

/** A time claim (`exp`, `nbf`): absent, or seconds since the epoch. */
const secondsClaim = (payload: Record<string, unknown>, name: 'exp' | 'nbf'): number | undefined => {
  const value = payload[name];
  if (value !== undefined && typeof value !== 'number')
    throw unauthorized(`the token's ${name} claim is not a number of seconds since the epoch`);
  return value;
};

const audienceAccepted = (aud: unknown, ownAudience: string): boolean => {
  const accepted = (value: unknown) => value === STATEBACKED_AUDIENCE || value === ownAudience;
  return Array.isArray(aud) ? aud.some(accepted) : accepted(aud);
};

/** The `act` claim, with the top-level `sub` as the fallback subject (wire-protocol §2.2). */
const authContextOf = (payload: Record<string, unknown>): Record<string, unknown> => {
  const act =
    typeof payload.act === 'object' && payload.act !== null && !Array.isArray(payload.act)
      ? { ...(payload.act as Record<string, unknown>) }
      : {};
  if (act.sub === undefined && typeof payload.sub === 'string') act.sub = payload.sub;
  return act;
};

/** `x-statebacked-act` replaces the auth context; only callers who may create keys may use it (§2.5). */
const impersonate = (caller: Caller, actHeader: string): Caller => {
  requireScope(caller, 'org.keys.write');
  if (tooDeep(actHeader))
    throw invalidParameter('x-statebacked-act', `x-statebacked-act nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep`);
  let act: unknown;
  try {
    act = JSON.parse(actHeader);
  } catch {
    throw invalidParameter('x-statebacked-act', 'x-statebacked-act must be a JSON object');
  }
  if (typeof act !== 'object' || act === null || Array.isArray(act)) {
    throw invalidParameter('x-statebacked-act', 'x-statebacked-act must be a JSON object');
  }
  return { ...caller, authContext: act as Record<string, unknown> };
};
