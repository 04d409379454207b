import { MAX_SUBJECT_TOKEN_CHARS } from '../../auth/subject-token.js';
import { TOKENS_AUDIENCE_PREFIX } from '../../auth/token-exchange.js';
import { clientAddressGroup } from '../../domain/client-address.js';
import { OAuthError } from '../../domain/errors.js';
import { isPrettyId } from '../../domain/ids.js';
import { TokenBuckets } from '../../runtime/rate-limit.js';
import type { ApiContext } from '../api-context.js';
import { type ApiRequest, json } from '../http-types.js';
import type { Router } from '../router.js';

const GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const SUBJECT_TOKEN_TYPES = new Set([
  ACCESS_TOKEN_TYPE,
  'urn:ietf:params:oauth:token-type:jwt',
  'urn:ietf:params:oauth:token-type:id_token',
]);
const SERVICE_PATTERN = /^[a-zA-Z0-9_-]{1,128}$/;
/**
 * Longest body taken: the subject token and a few short fields (the node's own limit, `--max-body-bytes`,
 * is for machine code and uploads). The route takes no credential: the server reads no more than this
 * of a request (413 past it), before anything else runs.
 */
const MAX_BODY_BYTES = MAX_SUBJECT_TOKEN_CHARS * 2;

/**
 * POST /tokens (wire-protocol §3.9): RFC 8693 token exchange. It takes no State Backed credential, so
 * it is rate-limited (per node): every request per client address (an IPv6 client by its /64) before
 * anything is looked up or fetched, --token-exchanges-per-address; and the tokens minted per org,
 * --token-exchanges-per-second. Only minted tokens count against the org: requests that fail (anyone
 * who knows the org id can send them, from many addresses) must not use up its real users' budget.
 */
export const registerTokenExchangeRoutes = (
  router: Router,
  context: ApiContext,
  limits: { perOrgPerSecond: number; perAddressPerSecond: number },
): void => {
  const perAddress = new TokenBuckets(limits.perAddressPerSecond, limits.perAddressPerSecond * 2);
  const perOrg = new TokenBuckets(limits.perOrgPerSecond, limits.perOrgPerSecond * 2);

  router.add(
    'POST',
    '/tokens',
    async (request) => {
      if (!perAddress.take(clientAddressGroup(request.remoteAddress))) {
        throw new OAuthError('slow_down', `at most ${limits.perAddressPerSecond} token exchanges a second from one address: retry later`);
      }
      const form = formOf(request);
      const grantType = form.get('grant_type');
      if (grantType !== GRANT_TYPE)
        throw new OAuthError(grantType === null ? 'invalid_request' : 'unsupported_grant_type', `grant_type must be ${GRANT_TYPE}`);
      // (the client spells it requested_token_type, the State Backed spec requested_token-type)
      const requested = form.get('requested_token_type') ?? form.get('requested_token-type');
      if (requested !== null && requested !== ACCESS_TOKEN_TYPE)
        throw new OAuthError('invalid_request', `requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
      const subjectTokenType = form.get('subject_token_type');
      if (subjectTokenType !== null && !SUBJECT_TOKEN_TYPES.has(subjectTokenType))
        throw new OAuthError('invalid_request', 'subject_token_type must name a JWT, an access token or an id token');
      const subjectToken = form.get('subject_token');
      if (!subjectToken || subjectToken.length > MAX_SUBJECT_TOKEN_CHARS)
        throw new OAuthError('invalid_request', `subject_token must be a JWT of at most ${MAX_SUBJECT_TOKEN_CHARS} characters`);
      const { orgId, service } = audienceOf(form.get('audience'));

      const { accessToken, expiresIn } = await context.tokenExchange.exchange({ orgId, service, subjectToken });
      if (!perOrg.take(orgId))
        throw new OAuthError('slow_down', `at most ${limits.perOrgPerSecond} token exchanges a second for one org: retry later`);
      return {
        ...json({ access_token: accessToken, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: expiresIn }),
        headers: { 'cache-control': 'no-store' },
      };
    },
    { maxBodyBytes: MAX_BODY_BYTES },
  );
};

/** Form-encoded as the spec says; a JSON object is taken too (the values are the same strings). */
const formOf = (request: ApiRequest): URLSearchParams => {
  const text = request.body.toString('utf8');
  if ((request.headers['content-type'] ?? '').includes('json')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
        return new URLSearchParams(Object.entries(parsed).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
      }
    } catch {
      // (reported below)
    }
    throw new OAuthError('invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  return new URLSearchParams(text);
};

/** `https://tokens.statebacked.dev/<orgId>/<service>`, whatever host the API is on (wire-protocol §10.13). */
const audienceOf = (audience: string | null): { orgId: string; service: string } => {
  const rest = audience?.startsWith(TOKENS_AUDIENCE_PREFIX) ? audience.slice(TOKENS_AUDIENCE_PREFIX.length) : undefined;
  const [orgId, service, ...more] = rest?.split('/') ?? [];
  if (orgId === undefined || service === undefined || more.length > 0 || !isPrettyId(orgId, 'org') || !SERVICE_PATTERN.test(service)) {
    throw new OAuthError('invalid_request', `audience must be ${TOKENS_AUDIENCE_PREFIX}<orgId>/<service>`);
  }
  return { orgId, service };
};
