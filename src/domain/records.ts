import type { Scope } from './scopes.js';

/** What the catalog stores. Dates are ISO-8601 strings, as they go on the wire. */
export interface OrgRecord {
  id: string;
  name: string;
  createdAt: string;
  allowAnonymousAccess: boolean;
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

/** Operator credential check: only a salted hash is stored. */
export interface AdminKeyRecord {
  salt: string;
  hash: string;
  createdAt: string;
}
