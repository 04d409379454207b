import type {
  AdminKeyRecord,
  AnonymousAccessRecords,
  IdentityProviderRecord,
  KeyRecord,
  MachineRecord,
  OrgRecord,
  TokenProviderRecord,
} from '../../domain/records.js';
import type { Catalog, OrgCursor } from '../catalog.js';
import type { ApplyOp, JetStreamOpLog } from './op-log.js';

/** A write to the catalog as it travels in the cluster's META log: the method and its arguments. */
export type CatalogOp =
  | { store: 'catalog'; method: 'createOrg'; args: [OrgRecord] | [OrgRecord, AnonymousAccessRecords] }
  | { store: 'catalog'; method: 'setAnonymousAccess'; args: [string, AnonymousAccessRecords | null] }
  | { store: 'catalog'; method: 'provisionAnonymousAccess'; args: [string, AnonymousAccessRecords] }
  | { store: 'catalog'; method: 'putIdentityProvider'; args: [IdentityProviderRecord, number] }
  | { store: 'catalog'; method: 'deleteIdentityProvider'; args: [string, string, string] }
  | { store: 'catalog'; method: 'putTokenProvider'; args: [TokenProviderRecord, number] }
  | { store: 'catalog'; method: 'deleteTokenProvider'; args: [string, string] }
  | { store: 'catalog'; method: 'putKey'; args: [KeyRecord] }
  | { store: 'catalog'; method: 'deleteKey'; args: [string, string] }
  | { store: 'catalog'; method: 'createMachine'; args: [MachineRecord] }
  | { store: 'catalog'; method: 'deleteMachine'; args: [string, string] }
  | { store: 'catalog'; method: 'putAdminKey'; args: [AdminKeyRecord] };

/** Applies a catalog write from the log to this node's local catalog (every node, in log order). */
export const applyCatalogOp =
  (local: Catalog): ApplyOp<CatalogOp> =>
  (op) => {
    switch (op.method) {
      case 'createOrg':
        return local.createOrg(op.args[0], op.args[1]);
      case 'setAnonymousAccess':
        // (JSON carries no undefined: off travels as null)
        return local.setAnonymousAccess(op.args[0], op.args[1] ?? undefined);
      case 'provisionAnonymousAccess':
        return local.provisionAnonymousAccess(...op.args);
      case 'putIdentityProvider':
        return local.putIdentityProvider(...op.args);
      case 'deleteIdentityProvider':
        return local.deleteIdentityProvider(...op.args);
      case 'putTokenProvider':
        return local.putTokenProvider(...op.args);
      case 'deleteTokenProvider':
        return local.deleteTokenProvider(...op.args);
      case 'putKey':
        return local.putKey(...op.args);
      case 'deleteKey':
        return local.deleteKey(...op.args);
      case 'createMachine':
        return local.createMachine(...op.args);
      case 'deleteMachine':
        return local.deleteMachine(...op.args);
      case 'putAdminKey':
        return local.putAdminKey(...op.args);
    }
  };

/**
 * The catalog of a cluster node: writes go through the cluster's META log (JetStream, replicated) and
 * resolve once applied to this node's LMDB catalog, with the local result (a machine that already
 * exists gives false on exactly one of two racing creates); reads are answered by the local catalog,
 * which every node keeps up to date from the log within milliseconds.
 */
export class ReplicatedCatalog implements Catalog {
  constructor(
    private readonly local: Catalog,
    private readonly log: JetStreamOpLog<CatalogOp>,
  ) {}

  createOrg(org: OrgRecord, anonymous?: AnonymousAccessRecords): Promise<void> {
    return this.submit({ store: 'catalog', method: 'createOrg', args: anonymous ? [org, anonymous] : [org] }) as Promise<void>;
  }

  setAnonymousAccess(orgId: string, anonymous: AnonymousAccessRecords | undefined): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'setAnonymousAccess', args: [orgId, anonymous ?? null] }) as Promise<boolean>;
  }

  getOrg(orgId: string): OrgRecord | undefined {
    return this.local.getOrg(orgId);
  }

  listOrgs(): OrgRecord[] {
    return this.local.listOrgs();
  }

  listOrgsAfter(after: OrgCursor | undefined, limit: number): OrgRecord[] {
    return this.local.listOrgsAfter(after, limit);
  }

  putKey(key: KeyRecord): Promise<void> {
    return this.submit({ store: 'catalog', method: 'putKey', args: [key] }) as Promise<void>;
  }

  getKey(keyId: string): KeyRecord | undefined {
    return this.local.getKey(keyId);
  }

  get keysGeneration(): number {
    return this.local.keysGeneration;
  }

  listKeys(orgId: string, afterId: string | undefined, limit: number): KeyRecord[] {
    return this.local.listKeys(orgId, afterId, limit);
  }

  deleteKey(orgId: string, keyId: string): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'deleteKey', args: [orgId, keyId] }) as Promise<boolean>;
  }

  createMachine(machine: MachineRecord): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'createMachine', args: [machine] }) as Promise<boolean>;
  }

  getMachine(orgId: string, slug: string): MachineRecord | undefined {
    return this.local.getMachine(orgId, slug);
  }

  listMachines(orgId: string, afterSlug: string | undefined, limit: number): MachineRecord[] {
    return this.local.listMachines(orgId, afterSlug, limit);
  }

  deleteMachine(orgId: string, slug: string): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'deleteMachine', args: [orgId, slug] }) as Promise<boolean>;
  }

  hasInstances(orgId: string, machineSlug: string): boolean {
    return this.local.hasInstances(orgId, machineSlug);
  }

  provisionAnonymousAccess(orgId: string, anonymous: AnonymousAccessRecords): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'provisionAnonymousAccess', args: [orgId, anonymous] }) as Promise<boolean>;
  }

  putIdentityProvider(idp: IdentityProviderRecord, maxPerOrg: number): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'putIdentityProvider', args: [idp, maxPerOrg] }) as Promise<boolean>;
  }

  listIdentityProviders(orgId: string, after: [string, string] | undefined, limit: number): IdentityProviderRecord[] {
    return this.local.listIdentityProviders(orgId, after, limit);
  }

  deleteIdentityProvider(orgId: string, aud: string, iss: string): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'deleteIdentityProvider', args: [orgId, aud, iss] }) as Promise<boolean>;
  }

  putTokenProvider(provider: TokenProviderRecord, maxPerOrg: number): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'putTokenProvider', args: [provider, maxPerOrg] }) as Promise<boolean>;
  }

  getTokenProvider(orgId: string, service: string): TokenProviderRecord | undefined {
    return this.local.getTokenProvider(orgId, service);
  }

  listTokenProviders(orgId: string, afterService: string | undefined, limit: number): TokenProviderRecord[] {
    return this.local.listTokenProviders(orgId, afterService, limit);
  }

  deleteTokenProvider(orgId: string, service: string): Promise<boolean> {
    return this.submit({ store: 'catalog', method: 'deleteTokenProvider', args: [orgId, service] }) as Promise<boolean>;
  }

  getAdminKey(): AdminKeyRecord | undefined {
    return this.local.getAdminKey();
  }

  putAdminKey(record: AdminKeyRecord): Promise<void> {
    return this.submit({ store: 'catalog', method: 'putAdminKey', args: [record] }) as Promise<void>;
  }

  private submit(op: CatalogOp): Promise<unknown> {
    return this.log.submit(op);
  }
}
