import type { MachineVersionMigrationRecord, MachineVersionRecord } from '../domain/records.js';

/**
 * Code uploaded for a provisional version, waiting for `PUT /machines/{m}/v/{signed id}` (wire-protocol
 * §3.2), or for a provisional migration (§3.3): then `versionId` holds the `mig_` id.
 */
export interface PendingUpload {
  orgId: string;
  machine: string;
  versionId: string;
  code: string;
  /** Epoch ms after which the upload may be swept (the signed id has expired by then). */
  expiresAt: number;
}

export type FinalizeResult =
  /** The version was stored now. */
  | { kind: 'created'; record: MachineVersionRecord }
  /** A version with that id already existed (a repeated finalize): nothing was written. */
  | { kind: 'existing'; record: MachineVersionRecord }
  /** The machine is gone: nothing was written. */
  | { kind: 'no-machine' };

export type FinalizeMigrationResult =
  | { kind: 'created'; record: MachineVersionMigrationRecord }
  | { kind: 'existing'; record: MachineVersionMigrationRecord }
  | { kind: 'no-machine' };

/** Position in a machine's version list: versions are listed newest first by (createdAt, id). */
export interface VersionCursor {
  createdAt: string;
  id: string;
}

/**
 * Machine versions and their code, namespaced by org. Reads are synchronous (LMDB gets are
 * memory-mapped); writes resolve once durable.
 */
export interface VersionStore {
  /** The version, only when it belongs to that machine of that org. */
  getVersion(orgId: string, machine: string, versionId: string): MachineVersionRecord | undefined;
  /** The finalized (uncompressed) ES module source of a version. */
  getVersionCode(orgId: string, versionId: string): string | undefined;

  /** Versions of one machine, newest first, starting after `after`. */
  listVersions(orgId: string, machine: string, after: VersionCursor | undefined, limit: number): MachineVersionRecord[];

  /** Stores (or replaces) the code uploaded for a provisional version. */
  putPendingUpload(upload: PendingUpload): Promise<void>;
  /** The pending uploads of an org not expired at `now` (epoch ms), with the size of each one's code (characters). */
  pendingUploadsOf(orgId: string, now: number): Array<{ versionId: string; chars: number }>;
  /** The pending upload of a provisional version, if any; it stays until finalized or swept. */
  getPendingUpload(orgId: string, versionId: string): PendingUpload | undefined;
  /** Drops pending uploads whose `expiresAt` is before `now` (epoch ms); resolves with how many. */
  sweepExpiredPendingUploads(now: number): Promise<number>;

  /**
   * Atomically: stores the record and its code, points the machine's current version at it when
   * `makeCurrent` or when the machine has no current version yet, and drops the pending upload. A
   * version that already exists is left untouched.
   */
  finalizeVersion(record: MachineVersionRecord, code: string, makeCurrent: boolean): Promise<FinalizeResult>;

  /** The migration, only when it belongs to that machine of that org. */
  getMigration(orgId: string, machine: string, migrationId: string): MachineVersionMigrationRecord | undefined;
  /** The finalized (uncompressed) ES module source of a migration. */
  getMigrationCode(orgId: string, migrationId: string): string | undefined;
  /** Every migration of one machine (a machine has few: the upgrade path search reads them all). */
  listMigrations(orgId: string, machine: string): MachineVersionMigrationRecord[];
  /**
   * Atomically: stores the migration and its code and drops its pending upload. One that already
   * exists is left untouched.
   */
  finalizeMigration(record: MachineVersionMigrationRecord, code: string): Promise<FinalizeMigrationResult>;

  /**
   * Removes every version and migration of the machine, their code and its pending uploads (machine
   * deletion); resolves with the removed version ids.
   */
  deleteMachineVersions(orgId: string, machine: string): Promise<string[]>;
}
