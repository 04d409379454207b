import { OAuthError } from '../domain/errors.js';
import type { Logger } from '../domain/logger.js';
import { type IdentityProviderRecord, identityProviderSealId } from '../domain/records.js';
import type { Catalog } from '../store/catalog.js';
import { STATEBACKED_AUDIENCE } from './authenticator.js';
import { ANONYMOUS_SERVICE, anonymousAudience } from '../domain/anonymous-access.js';
import { applyMapping, MappingError } from './claim-mapping.js';
import type { JwksCache } from './jwks-cache.js';
import type { KeyRing } from './key-ring.js';
import type { SecretSealer } from './secret-sealer.js';
import { idpKeyProblem, idpMatches, SubjectTokenRefused, unverifiedClaims, verifySubjectToken } from './subject-token.js';
import { mintStateBackedToken } from './token-minter.js';

/** The host the client puts in every exchange's `audience`, whatever API host it talks to (wire-protocol §3.9). */
export const TOKENS_AUDIENCE_PREFIX = 'https://tokens.statebacked.dev/';

/**
 * How long a minted token lives: as long as the subject token still does, at most a day. The client
 * can read `exp` from our tokens (token-minter.ts) and exchanges again once it has passed; a token
 * that outlives its subject would keep a revoked identity working.
 */
const MAX_TOKEN_LIFETIME_SECONDS = 24 * 3600;
/** The `act` of a minted token rides in every request's Authorization header: keep it small. */
const MAX_ACT_BYTES = 8 * 1024;
const LOGGED_REFUSALS_PER_SECOND = 10;
/** An anonymous session's and device's ids: strings, so authorizers comparing them compare strings. */
const MAX_SESSION_ID_CHARS = 256;
const isSessionId = (...ids: unknown[]): boolean =>
  ids.every((id) => typeof id === 'string' && id.length > 0 && id.length <= MAX_SESSION_ID_CHARS);

interface TokenExchangeRequest {
  orgId: string;
  service: string;
  subjectToken: string;
}

interface TokenExchangeOptions {
  catalog: Catalog;
  keyRing: KeyRing;
  sealer: SecretSealer;
  jwks: JwksCache;
  logger: Logger;
  /** Identity providers one org may have (also what an exchange may try). */
  maxIdentityProviders: number;
  now?: () => number;
}

/**
 * Token exchange (wire-protocol §3.9): a token from a trusted identity provider becomes a State Backed
 * token. Every refusal a client could learn from says only that the token was not accepted, or that it
 * expired (which the client needs, to fetch a fresh one); why exactly goes to the service log.
 */
export class TokenExchange {
  private readonly now: () => number;
  private logWindow = { second: 0, logged: 0, skipped: 0 };

  constructor(private readonly options: TokenExchangeOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Why an identity provider so configured could verify nothing (a key that does not suit its algs, a
   * JWKS URL the egress policy refuses), or undefined: for a 400 when it is configured.
   */
  configurationProblem(idp: { algs: readonly string[]; key?: Uint8Array; jwksUrl?: string }): string | undefined {
    return idpKeyProblem(idp) ?? (idp.jwksUrl === undefined ? undefined : this.options.jwks.urlProblem(idp.jwksUrl));
  }

  async exchange(request: TokenExchangeRequest): Promise<{ accessToken: string; expiresIn: number }> {
    const { catalog, keyRing } = this.options;
    const { orgId, service } = request;
    let unverified: Record<string, unknown>;
    try {
      // (bounded in size and depth before anything is parsed, as verification will be)
      unverified = await unverifiedClaims(request.subjectToken);
    } catch (error) {
      if (!(error instanceof SubjectTokenRefused)) throw error;
      throw new OAuthError('invalid_request', 'subject_token is not a JWT');
    }
    const org = catalog.getOrg(orgId);
    if (!org) throw this.refused(request, 'the org does not exist');
    const provider = catalog.getTokenProvider(orgId, service);
    if (!provider) throw this.refused(request, 'the org has no token provider for this service');

    const claims = await this.verified(request, unverified);
    const { identityProvider, verifiedClaims } = claims;

    if (service === ANONYMOUS_SERVICE && !isSessionId(verifiedClaims.sid, verifiedClaims.did)) {
      throw this.refused(request, `an anonymous token's sid and did must be strings of 1 to ${MAX_SESSION_ID_CHARS} characters`);
    }
    let act: Record<string, unknown>;
    try {
      act = applyMapping(provider.mapping, applyMapping(identityProvider.mapping, verifiedClaims));
    } catch (error) {
      if (error instanceof MappingError) throw this.refused(request, error.message);
      throw error;
    }
    if (Buffer.byteLength(JSON.stringify(act)) > MAX_ACT_BYTES) {
      throw this.refused(request, `the mapped claims are larger than ${MAX_ACT_BYTES} bytes`);
    }
    const key = keyRing.find(provider.keyId);
    if (!key || key.orgId !== orgId) throw this.refused(request, `the token provider's key ${provider.keyId} no longer exists`);

    const nowSeconds = Math.floor(this.now() / 1000);
    const subjectExp = typeof verifiedClaims.exp === 'number' ? Math.floor(verifiedClaims.exp) : undefined;
    const exp = Math.min(nowSeconds + MAX_TOKEN_LIFETIME_SECONDS, subjectExp ?? Number.POSITIVE_INFINITY);
    if (exp <= nowSeconds) throw new OAuthError('invalid_grant', 'the subject token has expired');
    const accessToken = mintStateBackedToken(key, {
      act,
      aud: STATEBACKED_AUDIENCE,
      iss: `${TOKENS_AUDIENCE_PREFIX}${orgId}/${service}`,
      iat: nowSeconds,
      exp,
    });
    return { accessToken, expiresIn: exp - nowSeconds };
  }

  /**
   * The matching identity providers are tried most specific first (both `aud` and `iss` configured
   * before one of them): the first that verifies the token is the one whose mapping applies.
   */
  private async verified(
    request: TokenExchangeRequest,
    unverified: Record<string, unknown>,
  ): Promise<{ identityProvider: IdentityProviderRecord; verifiedClaims: Record<string, unknown> }> {
    // The anonymous identity provider's key is the org id, which anyone may know (wire-protocol §4.1):
    // its tokens are exchanged for the anonymous service's only, and that service takes no others.
    const anonymous = anonymousAudience(request.orgId);
    const isAnonymous = (idp: IdentityProviderRecord) => idp.aud === anonymous && idp.iss === anonymous;
    const candidates = this.options.catalog
      .listIdentityProviders(request.orgId, undefined, this.options.maxIdentityProviders)
      .filter((idp) => isAnonymous(idp) === (request.service === ANONYMOUS_SERVICE) && idpMatches(idpSides(idp), unverified))
      .sort((a, b) => specificity(b) - specificity(a));
    if (candidates.length === 0) throw this.refused(request, "no identity provider of the org matches the token's aud and iss");
    let firstRefusal: SubjectTokenRefused | undefined;
    for (const idp of candidates) {
      try {
        const key =
          idp.sealedKey === undefined
            ? undefined
            : Buffer.from(this.options.sealer.open(idp.sealedKey, identityProviderSealId(idp)), 'base64url');
        const verifiedClaims = await verifySubjectToken(
          request.subjectToken,
          { ...idpSides(idp), algs: idp.algs, ...(key ? { key } : {}), ...(idp.jwksUrl ? { jwksUrl: idp.jwksUrl } : {}) },
          this.options.jwks,
          this.now() / 1000,
        );
        return { identityProvider: idp, verifiedClaims };
      } catch (error) {
        if (!(error instanceof SubjectTokenRefused)) throw error;
        firstRefusal ??= error;
      }
    }
    const refusal = firstRefusal as SubjectTokenRefused;
    if (refusal.category === 'expired') throw new OAuthError('invalid_grant', 'the subject token has expired');
    if (refusal.category === 'key-unavailable') {
      this.log(request, refusal.message);
      throw new OAuthError('temporarily_unavailable', "the identity provider's keys could not be fetched; retry later");
    }
    throw this.refused(request, refusal.message);
  }

  private refused(request: TokenExchangeRequest, reason: string): OAuthError {
    this.log(request, reason);
    return new OAuthError('invalid_grant', 'the subject token is not accepted for this audience');
  }

  /**
   * Refusals come from callers without a credential: at most LOGGED_REFUSALS_PER_SECOND lines a second
   * are written, and the next line says how many were left out.
   */
  private log(request: TokenExchangeRequest, reason: string): void {
    const second = Math.floor(this.now() / 1000);
    if (second !== this.logWindow.second) this.logWindow = { second, logged: 0, skipped: this.logWindow.skipped };
    if (this.logWindow.logged >= LOGGED_REFUSALS_PER_SECOND) {
      this.logWindow.skipped++;
      return;
    }
    this.logWindow.logged++;
    const skipped = this.logWindow.skipped;
    this.logWindow.skipped = 0;
    this.options.logger.info('token exchange refused', {
      org: request.orgId,
      service: request.service,
      reason,
      ...(skipped > 0 ? { notLoggedBefore: skipped } : {}),
    });
  }
}

const specificity = (idp: IdentityProviderRecord): number => (idp.aud === '' ? 0 : 1) + (idp.iss === '' ? 0 : 1);

/** The record's '' (not configured) as the verifier's absent side. */
const idpSides = (idp: Pick<IdentityProviderRecord, 'aud' | 'iss'>): { aud?: string; iss?: string } => ({
  ...(idp.aud === '' ? {} : { aud: idp.aud }),
  ...(idp.iss === '' ? {} : { iss: idp.iss }),
});
