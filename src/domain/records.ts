import type { Scope } from './scopes.js';

/** What the catalog stores. Dates are ISO-8601 strings, as they go on the wire. */
export interface OrgRecord {
  id: string;
  name: string;
  createdAt: string;
  allowAnonymousAccess: boolean;
  /**
   * The key of the org's anonymous-access records (wire-protocol §4.2), set while they exist. Absent
   * with `allowAnonymousAccess` true only for orgs stored before token exchange: the node provisions them.
   */
  anonymousKeyId?: string;
}

/** A signing key. The secret is kept only as ciphertext under the node's master key. */
export interface KeyRecord {
  id: string;
  orgId: string;
  name: string;
  scopes: Scope[];
  createdAt: string;
  sealedSecret: string;
}

export interface MachineRecord {
  orgId: string;
  slug: string;
  createdAt: string;
  indexes: string[];
  currentVersionId?: string;
}

/**
 * A finalized machine version (wire-protocol §3.2). Its code is stored beside it, keyed by org and id.
 * `indexSelectors` maps each index the version feeds to a JSONPath into the instance context.
 */
export interface MachineVersionRecord {
  id: string;
  orgId: string;
  machine: string;
  createdAt: string;
  /** Free text from the uploader; '' when none was given. */
  clientInfo: string;
  indexSelectors: Record<string, string>;
}

/**
 * A migration between two versions of one machine (wire-protocol §3.3, §7.5). Its code converts
 * instances from `fromVersionId` to `toVersionId`; the upgrade path search also walks it backwards.
 */
export interface MachineVersionMigrationRecord {
  id: string;
  orgId: string;
  machine: string;
  fromVersionId: string;
  toVersionId: string;
  createdAt: string;
}

/** JWS algorithms an identity provider may allow (wire-protocol §3.7). */
export const signingAlgorithms = [
  'HS256',
  'HS384',
  'HS512',
  'PS256',
  'PS384',
  'PS512',
  'RS256',
  'RS384',
  'RS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;
export type SigningAlgorithm = (typeof signingAlgorithms)[number];

/**
 * A trusted identity provider of an org (wire-protocol §3.7), identified by its `aud` and `iss` (at
 * least one set; '' stands for "not configured", a wildcard). Its verification key, when it has one
 * rather than a JWKS URL, is kept only sealed under the master key.
 */
export interface IdentityProviderRecord {
  orgId: string;
  aud: string;
  iss: string;
  algs: SigningAlgorithm[];
  jwksUrl?: string;
  /** The base64url of the raw key bytes, sealed (SecretSealer) with `identityProviderSealId` as its id. */
  sealedKey?: string;
  mapping: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

/** What binds a sealed identity-provider key to its record, so it opens on no other. */
export const identityProviderSealId = (idp: Pick<IdentityProviderRecord, 'orgId' | 'aud' | 'iss'>): string =>
  `idp:${idp.orgId}:${JSON.stringify([idp.aud, idp.iss])}`;

/** A token provider (wire-protocol §3.8): mints tokens for `service` signed by `keyId`. */
export interface TokenProviderRecord {
  orgId: string;
  service: string;
  keyId: string;
  mapping: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

/** The three ordinary records that make up an org's anonymous access (wire-protocol §4.2). */
export interface AnonymousAccessRecords {
  key: KeyRecord;
  identityProvider: IdentityProviderRecord;
  tokenProvider: TokenProviderRecord;
}

/** Operator credential check: only a salted hash is stored. */
export interface AdminKeyRecord {
  salt: string;
  hash: string;
  createdAt: string;
}
