import type { Database, RootDatabase } from 'lmdb';
import type { AdminKeyRecord, KeyRecord, MachineRecord, OrgRecord } from '../../domain/records.js';
import type { Catalog } from '../catalog.js';
import { msgpackOrJson } from './json-values.js';

/** Upper bound for the second element of a composite key: slugs and ids are ASCII. */
const AFTER_ALL = '\uffff';

/**
 * LMDB layout (msgpack values, ordered-binary array keys):
 *   orgs      orgId                      -> OrgRecord
 *   keys      keyId                      -> KeyRecord       (verification looks keys up by kid alone)
 *   orgKeys   [orgId, keyId]             -> true            (per-org listing)
 *   machines  [orgId, slug]              -> MachineRecord
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

  /**
   * `unappliedInstances`: whether the instance store holds acknowledged instances of a machine that are
   * not yet in LMDB (its write-ahead log is ahead of LMDB for a moment).
   */
  constructor(
    private readonly root: RootDatabase,
    private readonly unappliedInstances: (orgId: string, machineSlug: string) => boolean = () => false,
  ) {
    this.orgs = root.openDB({ name: 'orgs', encoding: 'msgpack' });
    this.keys = root.openDB({ name: 'keys', encoding: 'msgpack' });
    this.orgKeys = root.openDB({ name: 'orgKeys', encoding: 'msgpack' });
    this.machines = root.openDB({ name: 'machines', encoding: 'msgpack' });
    this.instances = root.openDB({ name: 'instances', ...msgpackOrJson });
    this.meta = root.openDB({ name: 'meta', encoding: 'msgpack' });
  }

  async createOrg(org: OrgRecord): Promise<void> {
    await this.orgs.put(org.id, org);
  }

  getOrg(orgId: string): OrgRecord | undefined {
    return this.orgs.get(orgId);
  }

  listOrgs(): OrgRecord[] {
    const all = [...this.orgs.getRange({}).map(({ value }) => value)];
    return all.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async putKey(key: KeyRecord): Promise<void> {
    await this.root.transaction(() => {
      void this.keys.put(key.id, key);
      void this.orgKeys.put([key.orgId, key.id], true);
    });
  }

  getKey(keyId: string): KeyRecord | undefined {
    return this.keys.get(keyId);
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
    return this.root.transaction(() => {
      const existing = this.keys.get(keyId);
      if (!existing || existing.orgId !== orgId) return false;
      void this.keys.remove(keyId);
      void this.orgKeys.remove([orgId, keyId]);
      return true;
    });
  }

  createMachine(machine: MachineRecord): Promise<boolean> {
    return this.machines.ifNoExists([machine.orgId, machine.slug], () => {
      void this.machines.put([machine.orgId, machine.slug], machine);
    });
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
    return this.root.transaction(() => {
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

  getAdminKey(): AdminKeyRecord | undefined {
    return this.meta.get('adminKey') as AdminKeyRecord | undefined;
  }

  async putAdminKey(record: AdminKeyRecord): Promise<void> {
    await this.meta.put('adminKey', record);
  }
}
