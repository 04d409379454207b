import { ANONYMOUS_SERVICE, anonymousAudience, anonymousIdentityMapping, anonymousTokenMapping } from '../domain/anonymous-access.js';
import { toBase64Url } from '../domain/base64url.js';
import { newKeySecret, prettyId } from '../domain/ids.js';
import { type AnonymousAccessRecords, identityProviderSealId } from '../domain/records.js';
import { scopePresets } from '../domain/scopes.js';
import type { Catalog } from '../store/catalog.js';
import type { SecretSealer } from './secret-sealer.js';

/**
 * The records an org with anonymous access has (wire-protocol §4.2): a production-use key, an identity
 * provider that trusts tokens HMAC-signed with the org id (which the client signs itself), and the
 * `anonymous-statebacked-dev` token provider whose tokens carry only `sid`, `did` and `auth`.
 * They are ordinary records: listed, and deletable, like any other.
 */
export const anonymousAccessRecords = (orgId: string, sealer: SecretSealer, now = new Date()): AnonymousAccessRecords => {
  const createdAt = now.toISOString();
  const keyId = prettyId('sbk');
  const audience = anonymousAudience(orgId);
  const idp = { orgId, aud: audience, iss: audience };
  return {
    key: {
      id: keyId,
      orgId,
      name: 'anonymous access',
      scopes: [...scopePresets.production],
      createdAt,
      sealedSecret: sealer.seal(newKeySecret(), keyId),
    },
    identityProvider: {
      ...idp,
      algs: ['HS256'],
      sealedKey: sealer.seal(toBase64Url(Buffer.from(orgId, 'utf8')), identityProviderSealId(idp)),
      mapping: { ...anonymousIdentityMapping },
      createdAt,
      updatedAt: createdAt,
    },
    tokenProvider: { orgId, service: ANONYMOUS_SERVICE, keyId, mapping: { ...anonymousTokenMapping }, createdAt, updatedAt: createdAt },
  };
};

/**
 * Gives every org that allows anonymous access but was stored without its records (before token
 * exchange existed, or bootstrapped by a node) its records. Safe on several cluster nodes at once, and
 * beside an admin's PATCH: the catalog applies the first provisioning of an org that still allows
 * anonymous access and has no records, and ignores the rest.
 */
export const provisionAnonymousAccess = async (catalog: Catalog, sealer: SecretSealer): Promise<string[]> => {
  const provisioned: string[] = [];
  for (const org of catalog.listOrgs()) {
    if (!org.allowAnonymousAccess || org.anonymousKeyId !== undefined) continue;
    if (await catalog.provisionAnonymousAccess(org.id, anonymousAccessRecords(org.id, sealer))) provisioned.push(org.id);
  }
  return provisioned;
};
