import type { Database, RootDatabase } from 'lmdb';
import { ANONYMOUS_SERVICE, anonymousAudience } from '../../domain/anonymous-access.js';
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
import { msgpackOrJson } from './json-values.js';
import { type StorageWrites, storageWrites } from './storage-writes.js';

/** Upper bound for the second element of a composite key: slugs and ids are ASCII. */
const AFTER_ALL = '\uffff';

/** Oldest first; orgs made in the same millisecond by id. */
const byAge = (a: OrgCursor, b: OrgCursor): number => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);

/**
 * LMDB layout (msgpack values, ordered-binary array keys):
 *   orgs      orgId                      -> OrgRecord
 *   keys      keyId                      -> KeyRecord       (verification looks keys up by kid alone)
 *   orgKeys   [orgId, keyId]             -> true            (per-org listing)
 *   machines  [orgId, slug]              -> MachineRecord
 *   idps      [orgId, aud, iss]          -> IdentityProviderRecord ('' for a side not configured)
 *   tokenProviders [orgId, service]      -> TokenProviderRecord
 *   instances [orgId, machine, instance] -> instance head   (written by the actor core)
 *   meta      name                       -> node metadata
 */
export class LmdbCatalog implements Catalog {
  private readonly orgs: Database<OrgRecord, string>;
  private readonly keys: Database<KeyRecord, string>;
  private readonly orgKeys: Database<true, [string, string]>;
  private readonly machines: Database<MachineRecord, [string, string]>;
  private readonly instances: Database<unknown, [string, string, string]>;
  private readonly meta: Database<unknown, string>;
  private readonly idps: Database<IdentityProviderRecord, [string, string, string]>;
  private readonly tokenProviders: Database<TokenProviderRecord, [string, string]>;
  /** Writes of keys committed so far (see keysGeneration). */
  private keyWrites = 0;

  /**
   * `unappliedInstances`: whether the instance store holds acknowledged instances of a machine that are
   * not yet in LMDB (its write-ahead log is ahead of LMDB for a moment).
   */
  constructor(
    root: RootDatabase,
    private readonly unappliedInstances: (orgId: string, machineSlug: string) => boolean = () => false,
    private readonly writes: StorageWrites = storageWrites(
      root,
      () => undefined,
      () => undefined,
    ),
  ) {
    this.orgs = root.openDB({ name: 'orgs', encoding: 'msgpack' });
    this.keys = root.openDB({ name: 'keys', encoding: 'msgpack' });
    this.orgKeys = root.openDB({ name: 'orgKeys', encoding: 'msgpack' });
    this.machines = root.openDB({ name: 'machines', encoding: 'msgpack' });
    this.instances = root.openDB({ name: 'instances', ...msgpackOrJson });
    this.meta = root.openDB({ name: 'meta', encoding: 'msgpack' });
    this.idps = root.openDB({ name: 'idps', encoding: 'msgpack' });
    this.tokenProviders = root.openDB({ name: 'tokenProviders', encoding: 'msgpack' });
  }

  async createOrg(org: OrgRecord, anonymous?: AnonymousAccessRecords): Promise<void> {
    await this.changingKeys(
      this.writes.transaction(() => {
        // An org is made once: a cluster's nodes starting together each make the bootstrap org (its id is
        // fixed), and the second, written over the first after it got its anonymous-access key, dropped the
        // key's id from the org, so the next provisioning made a second "anonymous access" key.
        if (this.orgs.get(org.id) !== undefined) return;
        void this.orgs.put(org.id, anonymous ? { ...org, anonymousKeyId: anonymous.key.id } : org);
        if (anonymous) this.writeAnonymousSync(anonymous);
      }),
    );
  }

  async setAnonymousAccess(orgId: string, anonymous: AnonymousAccessRecords | undefined): Promise<boolean> {
    return this.changingKeys(
      this.writes.transaction(() => {
        const org = this.orgs.get(orgId);
        if (!org) return false;
        if (anonymous && this.anonymousIntactSync(org)) {
          if (!org.allowAnonymousAccess) void this.orgs.put(orgId, { ...org, allowAnonymousAccess: true });
          return true;
        }
        this.removeAnonymousSync(org);
        const { anonymousKeyId: _, ...rest } = org;
        if (!anonymous) {
          void this.orgs.put(orgId, { ...rest, allowAnonymousAccess: false });
          return true;
        }
        this.writeAnonymousSync(anonymous);
        void this.orgs.put(orgId, { ...rest, allowAnonymousAccess: true, anonymousKeyId: anonymous.key.id });
        return true;
      }),
    );
  }

  async provisionAnonymousAccess(orgId: string, anonymous: AnonymousAccessRecords): Promise<boolean> {
    return this.changingKeys(
      this.writes.transaction(() => {
        const org = this.orgs.get(orgId);
        if (!org || !org.allowAnonymousAccess || org.anonymousKeyId !== undefined) return false;
        this.writeAnonymousSync(anonymous);
        void this.orgs.put(orgId, { ...org, anonymousKeyId: anonymous.key.id });
        return true;
      }),
    );
  }

  /** Whether the org's key, identity provider and token provider for anonymous access all still exist, tied together. */
  private anonymousIntactSync(org: OrgRecord): boolean {
    const keyId = org.anonymousKeyId;
    if (keyId === undefined || this.keys.get(keyId)?.orgId !== org.id) return false;
    const audience = anonymousAudience(org.id);
    return (
      this.idps.get([org.id, audience, audience]) !== undefined && this.tokenProviders.get([org.id, ANONYMOUS_SERVICE])?.keyId === keyId
    );
  }

  private removeAnonymousSync(org: OrgRecord): void {
    if (org.anonymousKeyId !== undefined && this.keys.get(org.anonymousKeyId)?.orgId === org.id) {
      void this.keys.remove(org.anonymousKeyId);
      void this.orgKeys.remove([org.id, org.anonymousKeyId]);
    }
    const audience = anonymousAudience(org.id);
    void this.idps.remove([org.id, audience, audience]);
    void this.tokenProviders.remove([org.id, ANONYMOUS_SERVICE]);
  }

  private writeAnonymousSync({ key, identityProvider, tokenProvider }: AnonymousAccessRecords): void {
    void this.keys.put(key.id, key);
    void this.orgKeys.put([key.orgId, key.id], true);
    void this.idps.put([identityProvider.orgId, identityProvider.aud, identityProvider.iss], identityProvider);
    void this.tokenProviders.put([tokenProvider.orgId, tokenProvider.service], tokenProvider);
  }

  getOrg(orgId: string): OrgRecord | undefined {
    return this.orgs.get(orgId);
  }

  listOrgs(): OrgRecord[] {
    const all = [...this.orgs.getRange({}).map(({ value }) => value)];
    return all.sort(byAge);
  }

  /** Orgs are keyed by id, not age: this sorts them all, which is cheap for the few a node holds. */
  listOrgsAfter(after: OrgCursor | undefined, limit: number): OrgRecord[] {
    const all = this.listOrgs();
    const start = after === undefined ? 0 : all.findIndex((org) => byAge(org, after) > 0);
    return start < 0 ? [] : all.slice(start, start + limit);
  }

  async putKey(key: KeyRecord): Promise<void> {
    await this.changingKeys(
      this.writes.transaction(() => {
        void this.keys.put(key.id, key);
        void this.orgKeys.put([key.orgId, key.id], true);
      }),
    );
  }

  getKey(keyId: string): KeyRecord | undefined {
    return this.keys.get(keyId);
  }

  get keysGeneration(): number {
    return this.keyWrites;
  }

  /** A write of keys, counted once it committed (or failed): until then readers still see the keys before it. */
  private async changingKeys<T>(write: Promise<T>): Promise<T> {
    try {
      return await write;
    } finally {
      this.keyWrites++;
    }
  }

  listKeys(orgId: string, afterId: string | undefined, limit: number): KeyRecord[] {
    const out: KeyRecord[] = [];
    for (const { key } of this.orgKeys.getRange({ start: [orgId, afterId ?? ''], end: [orgId, AFTER_ALL] })) {
      if (key[1] === afterId) continue;
      const record = this.keys.get(key[1]);
      if (record) out.push(record);
      if (out.length >= limit) break;
    }
    return out;
  }

  async deleteKey(orgId: string, keyId: string): Promise<boolean> {
    return this.changingKeys(
      this.writes.transaction(() => {
        const existing = this.keys.get(keyId);
        if (!existing || existing.orgId !== orgId) return false;
        void this.keys.remove(keyId);
        void this.orgKeys.remove([orgId, keyId]);
        // The org's anonymous-access key: its anonymous access goes with it, so that GET /orgs says
        // so and PATCH /orgs/{id} can turn it on again (with a new key), rather than leave the org
        // saying it has anonymous access that no exchange can give.
        const org = this.orgs.get(orgId);
        if (org?.anonymousKeyId === keyId) {
          this.removeAnonymousSync(org);
          const { anonymousKeyId: _, ...rest } = org;
          void this.orgs.put(orgId, { ...rest, allowAnonymousAccess: false });
        }
        return true;
      }),
    );
  }

  createMachine(machine: MachineRecord): Promise<boolean> {
    return this.writes.write(() =>
      this.machines.ifNoExists([machine.orgId, machine.slug], () => {
        void this.machines.put([machine.orgId, machine.slug], machine);
      }),
    );
  }

  getMachine(orgId: string, slug: string): MachineRecord | undefined {
    return this.machines.get([orgId, slug]);
  }

  listMachines(orgId: string, afterSlug: string | undefined, limit: number): MachineRecord[] {
    const out: MachineRecord[] = [];
    for (const { key, value } of this.machines.getRange({ start: [orgId, afterSlug ?? ''], end: [orgId, AFTER_ALL] })) {
      if (key[1] === afterSlug) continue;
      out.push(value);
      if (out.length >= limit) break;
    }
    return out;
  }

  async deleteMachine(orgId: string, slug: string): Promise<boolean> {
    return this.writes.transaction(() => {
      if (this.machines.get([orgId, slug]) === undefined) return false;
      void this.machines.remove([orgId, slug]);
      return true;
    });
  }

  /**
   * Points the machine at its current version. Synchronous, for use inside a `root.transaction`
   * (version finalization writes the version and this pointer atomically). false when the machine is gone.
   */
  setCurrentVersionSync(orgId: string, slug: string, versionId: string): boolean {
    const machine = this.machines.get([orgId, slug]);
    if (!machine) return false;
    void this.machines.put([orgId, slug], { ...machine, currentVersionId: versionId });
    return true;
  }

  hasInstances(orgId: string, machineSlug: string): boolean {
    if (this.unappliedInstances(orgId, machineSlug)) return true;
    for (const _ of this.instances.getKeys({ start: [orgId, machineSlug, ''], end: [orgId, machineSlug, AFTER_ALL], limit: 1 })) {
      return true;
    }
    return false;
  }

  async putIdentityProvider(idp: IdentityProviderRecord, maxPerOrg: number): Promise<boolean> {
    return this.writes.transaction(() => {
      const key: [string, string, string] = [idp.orgId, idp.aud, idp.iss];
      const existing = this.idps.get(key);
      if (!existing && this.countUnder(this.idps, idp.orgId) >= maxPerOrg) return false;
      void this.idps.put(key, existing ? { ...idp, createdAt: existing.createdAt } : idp);
      return true;
    });
  }

  listIdentityProviders(orgId: string, after: [string, string] | undefined, limit: number): IdentityProviderRecord[] {
    const out: IdentityProviderRecord[] = [];
    const start: [string, string, string] = after ? [orgId, after[0], after[1]] : [orgId, '', ''];
    for (const { key, value } of this.idps.getRange({ start, end: [orgId, AFTER_ALL, AFTER_ALL] })) {
      if (after && key[1] === after[0] && key[2] === after[1]) continue;
      out.push(value);
      if (out.length >= limit) break;
    }
    return out;
  }

  async deleteIdentityProvider(orgId: string, aud: string, iss: string): Promise<boolean> {
    return this.writes.transaction(() => {
      if (this.idps.get([orgId, aud, iss]) === undefined) return false;
      void this.idps.remove([orgId, aud, iss]);
      return true;
    });
  }

  async putTokenProvider(provider: TokenProviderRecord, maxPerOrg: number): Promise<boolean> {
    return this.writes.transaction(() => {
      const key: [string, string] = [provider.orgId, provider.service];
      const existing = this.tokenProviders.get(key);
      if (!existing && this.countUnder(this.tokenProviders, provider.orgId) >= maxPerOrg) return false;
      void this.tokenProviders.put(key, existing ? { ...provider, createdAt: existing.createdAt } : provider);
      return true;
    });
  }

  getTokenProvider(orgId: string, service: string): TokenProviderRecord | undefined {
    return this.tokenProviders.get([orgId, service]);
  }

  listTokenProviders(orgId: string, afterService: string | undefined, limit: number): TokenProviderRecord[] {
    const out: TokenProviderRecord[] = [];
    for (const { key, value } of this.tokenProviders.getRange({ start: [orgId, afterService ?? ''], end: [orgId, AFTER_ALL] })) {
      if (key[1] === afterService) continue;
      out.push(value);
      if (out.length >= limit) break;
    }
    return out;
  }

  async deleteTokenProvider(orgId: string, service: string): Promise<boolean> {
    return this.writes.transaction(() => {
      if (this.tokenProviders.get([orgId, service]) === undefined) return false;
      void this.tokenProviders.remove([orgId, service]);
      return true;
    });
  }

  private countUnder(db: Database<unknown, [string, string] | [string, string, string]>, orgId: string): number {
    let count = 0;
    for (const _ of db.getKeys({ start: [orgId], end: [orgId, AFTER_ALL] })) count++;
    return count;
  }

  getAdminKey(): AdminKeyRecord | undefined {
    return this.meta.get('adminKey') as AdminKeyRecord | undefined;
  }

  async putAdminKey(record: AdminKeyRecord): Promise<void> {
    await this.writes.write(() => this.meta.put('adminKey', record));
  }
}
