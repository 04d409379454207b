import { invalidParameter, notFound, scopesBeyondKey } from '../../domain/errors.js';
import { decodeStringCursor } from '../../domain/cursor.js';
import { newKeySecret, prettyId } from '../../domain/ids.js';
import { requireDisplayName } from '../../domain/names.js';
import type { KeyRecord } from '../../domain/records.js';
import { isScope, isScopePreset, type Scope, scopePresets } from '../../domain/scopes.js';
import { scopesLacking } from '../../auth/caller.js';
import { type ApiContext, callerInOrg } from '../api-context.js';
import { json, jsonBody, noContent } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';

/** GET /keys, POST /keys, DELETE /keys/{keyId} (wire-protocol §3.11). Secrets leave the node only once, at creation. */
export const registerKeyRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/keys', (request) => {
    const { orgId } = callerInOrg(context, request, 'tokens.admin');
    const after = decodeStringCursor(request.query.get('cursor'));
    const pageSize = context.settings.pageSize;
    const { items, cursor } = pageOf(context.catalog.listKeys(orgId, after, pageSize + 1), pageSize, (last) => last.id);
    return json({ keys: items.map(({ id, name, scopes, createdAt }) => ({ id, name, scopes, createdAt })), cursor });
  });

  router.add('POST', '/keys', async (request) => {
    const { caller, orgId } = callerInOrg(context, request, 'org.keys.write');
    const body = jsonBody(request);
    const name = requireDisplayName(body.name, 'name');
    const scopes = requestedScopes(body.scopes, body.use);
    const beyond = scopesLacking(caller, scopes);
    if (beyond.length > 0) throw scopesBeyondKey('give a new key', beyond);
    const id = prettyId('sbk');
    const secret = newKeySecret();
    const key: KeyRecord = { id, orgId, name, scopes, createdAt: new Date().toISOString(), sealedSecret: context.sealer.seal(secret, id) };
    await context.catalog.putKey(key);
    return json({ id, key: secret });
  });

  router.add('DELETE', '/keys/:keyId', async (request) => {
    // Any key of the org, whatever its scopes: revoking gives nothing, and a leaked strong key must be
    // revocable by whoever manages keys.
    const { orgId } = callerInOrg(context, request, 'org.keys.write');
    const keyId = request.params.keyId as string;
    const deleted = await context.catalog.deleteKey(orgId, keyId);
    if (!deleted) throw notFound(`key ${keyId} does not exist`);
    context.authenticator.forgetKey(keyId);
    return noContent(204);
  });
};

/** Explicit scopes win over `use` (smply sends `use: "production"` beside them, wire-protocol §3.11). */
const requestedScopes = (scopes: unknown, use: unknown): Scope[] => {
  if (scopes !== undefined && !Array.isArray(scopes)) throw invalidParameter('scopes', 'scopes must be an array of scope names');
  if (Array.isArray(scopes) && scopes.length > 0) {
    const unknown = scopes.filter((scope) => !isScope(scope));
    if (unknown.length > 0) throw invalidParameter('scopes', `unknown scopes: ${unknown.map(String).join(', ')}`);
    return [...new Set(scopes as Scope[])];
  }
  if (use === undefined) throw invalidParameter('scopes', 'give scopes, or use: "production" or "ci"');
  if (!isScopePreset(use)) throw invalidParameter('use', 'use must be "production" or "ci"');
  return [...scopePresets[use]];
};
