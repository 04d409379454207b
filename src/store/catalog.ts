import type { InstanceStore } from './instance-store.js';
import type { LogStore } from './log-store.js';
import type {
  AdminKeyRecord,
  AnonymousAccessRecords,
  IdentityProviderRecord,
  KeyRecord,
  MachineRecord,
  OrgRecord,
  TokenProviderRecord,
} from '../domain/records.js';
import type { VersionStore } from './version-store.js';

/** Position in the org list: orgs are listed oldest first by (createdAt, id). */
export interface OrgCursor {
  createdAt: string;
  id: string;
}

/**
 * The node's catalog: orgs, keys, machines and node metadata. Every method that touches org data takes
 * the org id, so one org can never address another's records. Writes resolve once durable.
 * Both deployments implement it (design.md §2): LMDB here, an LMDB cache fed by JetStream in a cluster.
 */
export interface Catalog {
  /** Creates the org and, when given, its anonymous-access records, in one write. */
  createOrg(org: OrgRecord, anonymous?: AnonymousAccessRecords): Promise<void>;
  getOrg(orgId: string): OrgRecord | undefined;
  /** All orgs, oldest first (by createdAt, then id). Orgs are few per node. */
  listOrgs(): OrgRecord[];
  /** At most `limit` orgs in listOrgs' order, starting after `after` (GET /orgs pages like every list). */
  listOrgsAfter(after: OrgCursor | undefined, limit: number): OrgRecord[];

  /**
   * Turns the org's anonymous access on or off (wire-protocol §4.2, PATCH /orgs/{id}). On: the org
   * keeps its records when all three are intact, and otherwise gets `anonymous` in place of whatever
   * is left of them (a deleted key, say). Off (`undefined`): removes the key the org names, the identity
   * provider for its anonymous audience and the `anonymous-statebacked-dev` token provider.
   * false when the org does not exist.
   */
  setAnonymousAccess(orgId: string, anonymous: AnonymousAccessRecords | undefined): Promise<boolean>;
  /**
   * Gives an org that allows anonymous access but has no records (stored before token exchange, or
   * bootstrapped) `anonymous`; changes nothing otherwise, the flag least of all: several cluster
   * nodes may propose it at once, or after an admin switched anonymous access off. true when written.
   */
  provisionAnonymousAccess(orgId: string, anonymous: AnonymousAccessRecords): Promise<boolean>;

  putKey(key: KeyRecord): Promise<void>;
  getKey(keyId: string): KeyRecord | undefined;
  /**
   * Changes once a write of keys (a key put or deleted, anonymous access set up or removed) committed
   * here, whether made through this node or applied from a cluster's log: a key read while it holds is
   * still what the catalog holds (KeyRing's cache).
   */
  readonly keysGeneration: number;
  /** Keys of one org ordered by id, starting after `afterId`. */
  listKeys(orgId: string, afterId: string | undefined, limit: number): KeyRecord[];
  /** false when the key does not exist in that org. */
  deleteKey(orgId: string, keyId: string): Promise<boolean>;

  /** false when a machine with that slug already exists in the org. */
  createMachine(machine: MachineRecord): Promise<boolean>;
  getMachine(orgId: string, slug: string): MachineRecord | undefined;
  listMachines(orgId: string, afterSlug: string | undefined, limit: number): MachineRecord[];
  /** Removes the machine and everything stored under it. false when it did not exist. */
  deleteMachine(orgId: string, slug: string): Promise<boolean>;
  hasInstances(orgId: string, machineSlug: string): boolean;

  /**
   * Creates or replaces the org's identity provider with the same `aud` and `iss` (its createdAt
   * kept). false, and nothing written, when it is new and the org already has `maxPerOrg`.
   */
  putIdentityProvider(idp: IdentityProviderRecord, maxPerOrg: number): Promise<boolean>;
  /** The org's identity providers ordered by [aud, iss], starting after `after`. */
  listIdentityProviders(orgId: string, after: [string, string] | undefined, limit: number): IdentityProviderRecord[];
  deleteIdentityProvider(orgId: string, aud: string, iss: string): Promise<boolean>;

  /** Creates or replaces the org's token provider for `service`; false when new and `maxPerOrg` exist. */
  putTokenProvider(provider: TokenProviderRecord, maxPerOrg: number): Promise<boolean>;
  getTokenProvider(orgId: string, service: string): TokenProviderRecord | undefined;
  listTokenProviders(orgId: string, afterService: string | undefined, limit: number): TokenProviderRecord[];
  deleteTokenProvider(orgId: string, service: string): Promise<boolean>;

  getAdminKey(): AdminKeyRecord | undefined;
  putAdminKey(record: AdminKeyRecord): Promise<void>;
}

/** The storage of one node: its catalog now; logs, snapshots and blobs join it with the actor core. */
export interface NodeStore {
  readonly catalog: Catalog;
  /** Machine versions, their code and pending code uploads. */
  readonly versions: VersionStore;
  /** Instance heads, their transition histories and usage counters. */
  readonly instances: InstanceStore;
  /** Console output of machine code and service lines about instances. */
  readonly logs: LogStore;
  /** Waits for every accepted write to be durable, then releases the files. */
  close(): Promise<void>;
}
