import type { Database, RootDatabase } from 'lmdb';
import type { MachineVersionMigrationRecord, MachineVersionRecord } from '../../domain/records.js';
import type { FinalizeMigrationResult, FinalizeResult, PendingUpload, VersionCursor, VersionStore } from '../version-store.js';
import type { LmdbCatalog } from './lmdb-catalog.js';
import { type StorageWrites, storageWrites } from './storage-writes.js';

/** Upper bound for a string element of a composite key: slugs, ids and ISO dates are ASCII. */
const AFTER_ALL = '\uffff';

interface PendingMeta {
  machine: string;
  expiresAt: number;
  /** The code's length in characters (absent in uploads stored before 2026-11-30: read from the code). */
  chars?: number;
}

/**
 * LMDB layout (ordered-binary array keys):
 *   versions          [orgId, versionId]                      -> MachineVersionRecord (msgpack)
 *   machineVersions   [orgId, machine, createdAt, versionId]  -> true   (listing, newest first)
 *   versionCode       [orgId, versionId]                      -> code (string)
 *   pendingUploads    [orgId, versionId]                      -> {machine, expiresAt}
 *   pendingCode       [orgId, versionId]                      -> code (string)
 *   pendingByExpiry   [expiresAt, orgId, versionId]           -> true   (sweeping)
 *   migrations        [orgId, machine, migrationId]           -> MachineVersionMigrationRecord
 *   migrationCode     [orgId, migrationId]                    -> code (string)
 * A provisional migration's upload is a pending upload like a version's, keyed by its `mig_` id.
 * The machine's current version pointer lives on its catalog record (`currentVersionId`).
 */
export class LmdbVersionStore implements VersionStore {
  private readonly versions: Database<MachineVersionRecord, [string, string]>;
  private readonly machineVersions: Database<true, [string, string, string, string]>;
  private readonly versionCode: Database<string, [string, string]>;
  private readonly pendingUploads: Database<PendingMeta, [string, string]>;
  private readonly pendingCode: Database<string, [string, string]>;
  private readonly pendingByExpiry: Database<true, [number, string, string]>;
  private readonly migrations: Database<MachineVersionMigrationRecord, [string, string, string]>;
  private readonly migrationCode: Database<string, [string, string]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: LmdbCatalog,
    private readonly writes: StorageWrites = storageWrites(
      root,
      () => undefined,
      () => undefined,
    ),
  ) {
    this.versions = root.openDB({ name: 'versions', encoding: 'msgpack' });
    this.machineVersions = root.openDB({ name: 'machineVersions', encoding: 'msgpack' });
    this.versionCode = root.openDB({ name: 'versionCode', encoding: 'string' });
    this.pendingUploads = root.openDB({ name: 'pendingUploads', encoding: 'msgpack' });
    this.pendingCode = root.openDB({ name: 'pendingCode', encoding: 'string' });
    this.pendingByExpiry = root.openDB({ name: 'pendingByExpiry', encoding: 'msgpack' });
    this.migrations = root.openDB({ name: 'migrations', encoding: 'msgpack' });
    this.migrationCode = root.openDB({ name: 'migrationCode', encoding: 'string' });
  }

  getVersion(orgId: string, machine: string, versionId: string): MachineVersionRecord | undefined {
    const record = this.versions.get([orgId, versionId]);
    return record && record.machine === machine ? record : undefined;
  }

  getVersionCode(orgId: string, versionId: string): string | undefined {
    return this.versionCode.get([orgId, versionId]);
  }

  listVersions(orgId: string, machine: string, after: VersionCursor | undefined, limit: number): MachineVersionRecord[] {
    const out: MachineVersionRecord[] = [];
    const start: [string, string, string, string] = after
      ? [orgId, machine, after.createdAt, after.id]
      : [orgId, machine, AFTER_ALL, AFTER_ALL];
    for (const { key } of this.machineVersions.getRange({ start, end: [orgId, machine, '', ''], reverse: true })) {
      if (after && key[2] === after.createdAt && key[3] === after.id) continue;
      const record = this.versions.get([orgId, key[3]]);
      if (record) out.push(record);
      if (out.length >= limit) break;
    }
    return out;
  }

  async putPendingUpload(upload: PendingUpload): Promise<void> {
    const { orgId, versionId, machine, code, expiresAt } = upload;
    await this.writes.transaction(() => {
      const previous = this.pendingUploads.get([orgId, versionId]);
      if (previous) void this.pendingByExpiry.remove([previous.expiresAt, orgId, versionId]);
      void this.pendingUploads.put([orgId, versionId], { machine, expiresAt, chars: code.length });
      void this.pendingCode.put([orgId, versionId], code);
      void this.pendingByExpiry.put([expiresAt, orgId, versionId], true);
    });
  }

  pendingUploadsOf(orgId: string, now: number): Array<{ versionId: string; chars: number }> {
    const out: Array<{ versionId: string; chars: number }> = [];
    for (const { key, value } of this.pendingUploads.getRange({ start: [orgId, ''], end: [orgId, AFTER_ALL] })) {
      if (value.expiresAt < now) continue;
      const versionId = key[1];
      out.push({ versionId, chars: value.chars ?? this.pendingCode.get([orgId, versionId])?.length ?? 0 });
    }
    return out;
  }

  getPendingUpload(orgId: string, versionId: string): PendingUpload | undefined {
    const meta = this.pendingUploads.get([orgId, versionId]);
    if (!meta) return undefined;
    const code = this.pendingCode.get([orgId, versionId]);
    if (code === undefined) return undefined;
    return { orgId, versionId, machine: meta.machine, expiresAt: meta.expiresAt, code };
  }

  async sweepExpiredPendingUploads(now: number): Promise<number> {
    const expired = [...this.pendingByExpiry.getKeys({ start: [0, '', ''], end: [now, '', ''] })];
    if (expired.length === 0) return 0;
    await this.writes.transaction(() => {
      for (const key of expired) {
        const [expiresAt, orgId, versionId] = key;
        const meta = this.pendingUploads.get([orgId, versionId]);
        // Re-uploaded since the scan with a later expiry: keep it, drop only the stale index entry.
        if (meta && meta.expiresAt !== expiresAt) void this.pendingByExpiry.remove(key);
        else this.removePendingSync(orgId, versionId, expiresAt);
      }
    });
    return expired.length;
  }

  finalizeVersion(record: MachineVersionRecord, code: string, makeCurrent: boolean): Promise<FinalizeResult> {
    const { orgId, machine, id } = record;
    return this.writes.transaction((): FinalizeResult => {
      const existing = this.versions.get([orgId, id]);
      if (existing) return { kind: 'existing', record: existing };
      const machineRecord = this.catalog.getMachine(orgId, machine);
      if (!machineRecord) return { kind: 'no-machine' };
      void this.versions.put([orgId, id], record);
      void this.machineVersions.put([orgId, machine, record.createdAt, id], true);
      void this.versionCode.put([orgId, id], code);
      // A machine without a current version can have no instances (interface spec: none until a version
      // exists), so its first version becomes current even without makeCurrent. Decided here, from the
      // catalog as it is in this transaction, so every cluster node applying the META log decides alike.
      if (makeCurrent || machineRecord.currentVersionId === undefined) this.catalog.setCurrentVersionSync(orgId, machine, id);
      this.removePendingSync(orgId, id);
      return { kind: 'created', record };
    });
  }

  getMigration(orgId: string, machine: string, migrationId: string): MachineVersionMigrationRecord | undefined {
    return this.migrations.get([orgId, machine, migrationId]);
  }

  getMigrationCode(orgId: string, migrationId: string): string | undefined {
    return this.migrationCode.get([orgId, migrationId]);
  }

  listMigrations(orgId: string, machine: string): MachineVersionMigrationRecord[] {
    return [...this.migrations.getRange({ start: [orgId, machine, ''], end: [orgId, machine, AFTER_ALL] })].map(({ value }) => value);
  }

  finalizeMigration(record: MachineVersionMigrationRecord, code: string): Promise<FinalizeMigrationResult> {
    const { orgId, machine, id } = record;
    return this.writes.transaction((): FinalizeMigrationResult => {
      const existing = this.migrations.get([orgId, machine, id]);
      if (existing) return { kind: 'existing', record: existing };
      if (!this.catalog.getMachine(orgId, machine)) return { kind: 'no-machine' };
      void this.migrations.put([orgId, machine, id], record);
      void this.migrationCode.put([orgId, id], code);
      this.removePendingSync(orgId, id);
      return { kind: 'created', record };
    });
  }

  deleteMachineVersions(orgId: string, machine: string): Promise<string[]> {
    return this.writes.transaction(() => {
      // Collect first, then write: no cursor stays open over the entries being removed.
      const versionKeys = [
        ...this.machineVersions.getKeys({ start: [orgId, machine, '', ''], end: [orgId, machine, AFTER_ALL, AFTER_ALL] }),
      ];
      for (const key of versionKeys) {
        const versionId = key[3];
        void this.versions.remove([orgId, versionId]);
        void this.versionCode.remove([orgId, versionId]);
        void this.machineVersions.remove(key);
      }
      const migrationKeys = [...this.migrations.getKeys({ start: [orgId, machine, ''], end: [orgId, machine, AFTER_ALL] })];
      for (const key of migrationKeys) {
        void this.migrations.remove(key);
        void this.migrationCode.remove([orgId, key[2]]);
      }
      const pending = [...this.pendingUploads.getRange({ start: [orgId, ''], end: [orgId, AFTER_ALL] })].filter(
        ({ value }) => value.machine === machine,
      );
      for (const { key, value } of pending) this.removePendingSync(orgId, key[1], value.expiresAt);
      return versionKeys.map((key) => key[3]);
    });
  }

  /** Inside a transaction: drops a pending upload and its expiry entry. */
  private removePendingSync(orgId: string, versionId: string, expiresAt?: number): void {
    const at = expiresAt ?? this.pendingUploads.get([orgId, versionId])?.expiresAt;
    if (at !== undefined) void this.pendingByExpiry.remove([at, orgId, versionId]);
    void this.pendingUploads.remove([orgId, versionId]);
    void this.pendingCode.remove([orgId, versionId]);
  }
}
