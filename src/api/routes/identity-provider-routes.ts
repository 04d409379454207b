import { decodeCursor } from '../../domain/cursor.js';
import { invalidParameter, notFound, ServiceError } from '../../domain/errors.js';
import { limits } from '../../domain/limits.js';
import { type IdentityProviderRecord, identityProviderSealId, type SigningAlgorithm, signingAlgorithms } from '../../domain/records.js';
import { type ApiContext, callerInOrg } from '../api-context.js';
import { json, jsonBody, noContent } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';
import { checkMapping } from './token-provider-routes.js';

/** `aud`/`iss`: visible ASCII (they are URLs or plain names), at most this long. */
const MAX_CLAIM_CHARS = 512;
const MAX_KEY_BYTES = 16 * 1024;
const MAX_URL_CHARS = 2048;

/**
 * GET, POST (upsert) and DELETE /idps (wire-protocol §3.7). A verification key is sealed at rest and
 * never returned.
 */
export const registerIdentityProviderRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/idps', (request) => {
    const { orgId } = callerInOrg(context, request, 'tokens.admin');
    const after = cursorPosition(request.query.get('cursor'));
    const pageSize = context.settings.pageSize;
    const found = context.catalog.listIdentityProviders(orgId, after, pageSize + 1);
    const { items, cursor } = pageOf(found, pageSize, (last) => [last.aud, last.iss]);
    return json({ idps: items.map(view), cursor });
  });

  router.add('POST', '/idps', async (request) => {
    const { orgId } = callerInOrg(context, request, 'tokens.admin');
    const body = jsonBody(request);
    const { aud, iss } = identity(body);
    const algs = algorithms(body.algs);
    const mapping = checkMapping(body.mapping);
    const hasKey = body.key !== undefined && body.key !== null;
    const hasUrl = body.jwksUrl !== undefined && body.jwksUrl !== null;
    if (hasKey === hasUrl)
      throw invalidParameter(hasKey ? 'jwksUrl' : 'key', 'give exactly one of key (base64url of the raw verification key) and jwksUrl');
    const now = new Date().toISOString();
    const record: IdentityProviderRecord = { orgId, aud, iss, algs, mapping, createdAt: now, updatedAt: now };
    const key = hasKey ? verificationKey(body.key) : undefined;
    if (hasUrl) record.jwksUrl = jwksUrl(body.jwksUrl);
    const problem = context.tokenExchange.configurationProblem({
      algs,
      ...(key ? { key } : {}),
      ...(record.jwksUrl ? { jwksUrl: record.jwksUrl } : {}),
    });
    if (problem !== undefined) throw invalidParameter(key ? 'key' : 'jwksUrl', problem);
    if (key) record.sealedKey = context.sealer.seal(key.toString('base64url'), identityProviderSealId(record));
    const stored = await context.catalog.putIdentityProvider(record, limits.maxIdentityProvidersPerOrg);
    if (!stored)
      throw new ServiceError(
        409,
        'invalid-state',
        `an org may trust at most ${limits.maxIdentityProvidersPerOrg} identity providers: delete one first`,
      );
    return noContent(204);
  });

  router.add('DELETE', '/idps', async (request) => {
    const { orgId } = callerInOrg(context, request, 'tokens.admin');
    const { aud, iss } = identity(jsonBody(request));
    if (!(await context.catalog.deleteIdentityProvider(orgId, aud, iss))) {
      throw notFound(`no identity provider with ${describe(aud, iss)} exists`);
    }
    return noContent(204);
  });
};

const view = (idp: IdentityProviderRecord) => ({
  ...(idp.aud === '' ? {} : { aud: idp.aud }),
  ...(idp.iss === '' ? {} : { iss: idp.iss }),
  algs: idp.algs,
  ...(idp.jwksUrl === undefined ? {} : { jwksUrl: idp.jwksUrl }),
  mapping: idp.mapping,
});

const describe = (aud: string, iss: string): string =>
  [aud && `aud ${JSON.stringify(aud)}`, iss && `iss ${JSON.stringify(iss)}`].filter(Boolean).join(' and ');

/** `aud` and `iss`, '' for a side not given; at least one must be. */
const identity = (body: Record<string, unknown>): { aud: string; iss: string } => {
  const side = (name: 'aud' | 'iss'): string => {
    const value = body[name];
    if (value === undefined || value === null || value === '') return '';
    if (typeof value !== 'string' || value.length > MAX_CLAIM_CHARS || !/^[\x21-\x7e]+$/.test(value)) {
      throw invalidParameter(name, `${name} must be a string of at most ${MAX_CLAIM_CHARS} visible ASCII characters`);
    }
    return value;
  };
  const aud = side('aud');
  const iss = side('iss');
  if (aud === '' && iss === '') throw invalidParameter('aud', "give aud, iss or both: they identify the identity provider's tokens");
  return { aud, iss };
};

const algorithms = (value: unknown): SigningAlgorithm[] => {
  const known: readonly string[] = signingAlgorithms;
  if (!Array.isArray(value) || value.length === 0 || value.some((alg) => typeof alg !== 'string' || !known.includes(alg))) {
    throw invalidParameter('algs', `algs must be a non-empty array of ${signingAlgorithms.join(', ')}`);
  }
  return [...new Set(value as SigningAlgorithm[])];
};

/** smply sends base64url; standard base64 (with or without padding) is taken too. */
const verificationKey = (value: unknown): Buffer => {
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(value))
    throw invalidParameter('key', 'key must be the base64url of the raw verification key');
  const bytes = Buffer.from(value, 'base64url');
  if (bytes.length === 0 || bytes.length > MAX_KEY_BYTES) throw invalidParameter('key', `key must decode to 1 to ${MAX_KEY_BYTES} bytes`);
  return bytes;
};

const jwksUrl = (value: unknown): string => {
  let url: URL | undefined;
  try {
    url = typeof value === 'string' && value.length <= MAX_URL_CHARS ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.username !== '' || url.password !== '') {
    throw invalidParameter('jwksUrl', `jwksUrl must be an absolute https URL of at most ${MAX_URL_CHARS} characters, without credentials`);
  }
  return url.href;
};

const cursorPosition = (cursor: string | null): [string, string] | undefined => {
  const position = decodeCursor(cursor, 4 * MAX_CLAIM_CHARS);
  if (position === undefined) return undefined;
  if (!Array.isArray(position) || position.length !== 2 || !position.every((p) => typeof p === 'string')) {
    throw invalidParameter('cursor', 'cursor is not one this service returned');
  }
  return position as [string, string];
};
