import type { MachineVersionRecord } from '../domain/records.js';

/** Code uploaded for a provisional version, waiting for `PUT /machines/{m}/v/{signed id}` (wire-protocol §3.2). */
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
  /** The pending upload of a provisional version, if any; it stays until finalized or swept. */
  getPendingUpload(orgId: string, versionId: string): PendingUpload | undefined;
  /** Drops pending uploads whose `expiresAt` is before `now` (epoch ms); resolves with how many. */
  sweepExpiredPendingUploads(now: number): Promise<number>;

  /**
   * Atomically: stores the record and its code, points the machine's current version at it when
   * `makeCurrent`, and drops the pending upload. A version that already exists is left untouched.
   */
  finalizeVersion(record: MachineVersionRecord, code: string, makeCurrent: boolean): Promise<FinalizeResult>;

  /** Removes every version, its code and any pending upload of the machine (machine deletion). */
  /** Removes every version of the machine and its pending uploads; resolves with the removed version ids. */
  deleteMachineVersions(orgId: string, machine: string): Promise<string[]>;
}
