import { scopesLacking } from '../../auth/caller.js';
import { validateMapping } from '../../auth/claim-mapping.js';
import { decodeStringCursor } from '../../domain/cursor.js';
import { invalidParameter, notFound, scopesBeyondKey, ServiceError } from '../../domain/errors.js';
import { limits } from '../../domain/limits.js';
import { isPrettyId } from '../../domain/ids.js';
import type { TokenProviderRecord } from '../../domain/records.js';
import { type ApiContext, callerInOrg } from '../api-context.js';
import { json, jsonBody, noContent } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';

const SERVICE_PATTERN = /^[a-zA-Z0-9_-]{1,128}$/;
const MAX_MAPPING_BYTES = 16 * 1024;

/** GET, POST (upsert) /token-providers and DELETE /token-providers/{service} (wire-protocol §3.8). */
export const registerTokenProviderRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/token-providers', (request) => {
    const { orgId } = callerInOrg(context, request, 'tokens.admin');
    const after = decodeStringCursor(request.query.get('cursor'));
    const pageSize = context.settings.pageSize;
    const { items, cursor } = pageOf(context.catalog.listTokenProviders(orgId, after, pageSize + 1), pageSize, (last) => last.service);
    return json({ tokenProviders: items.map(({ service, keyId, mapping }) => ({ service, keyId, mapping })), cursor });
  });

  router.add('POST', '/token-providers', async (request) => {
    const { caller, orgId } = callerInOrg(context, request, 'tokens.admin');
    const body = jsonBody(request);
    const { service, keyId } = body;
    if (typeof service !== 'string' || !SERVICE_PATTERN.test(service)) {
      throw invalidParameter('service', 'service must be 1 to 128 characters of letters, digits, _ and -');
    }
    const key = typeof keyId === 'string' && isPrettyId(keyId, 'sbk') ? context.catalog.getKey(keyId) : undefined;
    if (key?.orgId !== orgId) throw invalidParameter('keyId', 'keyId must name a key of this org (sbk_...)');
    // (the tokens it mints carry the key's scopes: a key could otherwise borrow a stronger one's)
    const beyond = scopesLacking(caller, key.scopes);
    if (beyond.length > 0) throw scopesBeyondKey('point a token provider at a key', beyond);
    const mapping = checkMapping(body.mapping);
    const now = new Date().toISOString();
    const record: TokenProviderRecord = { orgId, service, keyId: key.id, mapping, createdAt: now, updatedAt: now };
    if (!(await context.catalog.putTokenProvider(record, limits.maxTokenProvidersPerOrg))) {
      throw new ServiceError(
        409,
        'invalid-state',
        `an org may have at most ${limits.maxTokenProvidersPerOrg} token providers: delete one first`,
      );
    }
    return noContent(204);
  });

  router.add('DELETE', '/token-providers/:service', async (request) => {
    const { orgId } = callerInOrg(context, request, 'tokens.admin');
    const service = request.params.service as string;
    if (!SERVICE_PATTERN.test(service) || !(await context.catalog.deleteTokenProvider(orgId, service))) {
      throw notFound(`no token provider for service ${JSON.stringify(service.slice(0, 128))} exists`);
    }
    return noContent(204);
  });
};

/** A mapping as the exchange will apply it (wire-protocol §4.3), or a 400 naming `mapping`. */
export const checkMapping = (value: unknown): Record<string, unknown> => {
  const problem = validateMapping(value);
  if (problem !== undefined) throw invalidParameter('mapping', `mapping: ${problem}`);
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_MAPPING_BYTES)
    throw invalidParameter('mapping', `mapping must be at most ${MAX_MAPPING_BYTES} bytes of JSON`);
  return value as Record<string, unknown>;
};
