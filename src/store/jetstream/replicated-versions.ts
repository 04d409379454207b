import { createHash } from 'node:crypto';
import { type ObjectStore, Objm } from '@nats-io/obj';
import { jetstream, StorageType } from '@nats-io/jetstream';
import { ClosedConnectionError, DrainingConnectionError, type NatsConnection } from '@nats-io/transport-node';
import type { MachineVersionMigrationRecord, MachineVersionRecord } from '../../domain/records.js';
import type { FinalizeMigrationResult, FinalizeResult, PendingUpload, VersionCursor, VersionStore } from '../version-store.js';
import type { ApplyOp, JetStreamOpLog } from './op-log.js';
import { STREAM_OPEN_TIMEOUT_MS } from './stream-opening.js';

/*
 * Code bundles (up to 10 MB) are far above JetStream's 1 MB message limit, so they never travel in the
 * META log: the submitter first puts the code in the cluster's object store bucket, then submits an
 * operation that names the object and its digest; every node's apply reads the object and hands the
 * code to its local LMDB store.
 *
 * Object names:
 *   pending/<orgId>/<versionId>            a pending upload; a re-upload overwrites it (same name)
 *   version/<orgId>/<versionId>/<sha256>   a finalized version's code
 *   migration/<orgId>/<migrationId>/<sha256>  a finalized migration's code (metadata: its machine)
 * A provisional migration's upload is a pending upload named by its `mig_` id; migrations follow every
 * rule below that versions do.
 * A version's name carries the code's digest because two nodes may race to finalize one version id
 * with different bytes (a re-upload between their reads): under one shared name the later put would
 * replace the bytes the winning operation named, and nodes would store different code for one version.
 * A pending upload needs no such care: a re-upload's operation follows its put, so a node that reads
 * the newer bytes for the older operation is corrected by the next operation (and the digest check
 * below makes it skip the older one instead).
 *
 * Who deletes objects: only the submitting node, only after its own operation was applied here (so
 * the operation that makes the object useless is in the log before the object goes), and never inside
 * apply, which runs on every node and must stay idempotent. Apply therefore has to cope with an object
 * that is gone or replaced: that happens to a node replaying old operations (a new node, or one far
 * behind), or to any node when a re-upload replaced a pending object before the older operation was
 * applied, and only when a later operation in the log supersedes the one being applied:
 *   - a pending upload gone or replaced (digest differs): skipped; a later upload, finalize, sweep or
 *     machine deletion in the log leaves the same state whether or not it was applied;
 *   - a version's code gone: the version was created and later removed by a deleteMachineVersions
 *     operation further on in the log (or the finalize was a no-op on every node: `existing` or
 *     `no-machine`, which never reads the code); the record is applied with empty code so the makeCurrent
 *     pointer moves as it did everywhere, and the later deletion removes it again.
 * A submitter that dies between its operation and its deletions leaves an orphan object: a leak,
 * never a wrong state. The object store's delete is a read then a tombstone, not a compare-and-delete,
 * so a delete can still meet a put of the same name made meanwhile: a re-upload of a version just
 * finalized, past its expiry or while its machine is being deleted (the deleters skip any pending
 * upload whose operation is applied here already, which leaves a window of milliseconds); nodes may then
 * disagree on a pending upload nobody can use any more, until a sweep. Deleted objects leave a small
 * tombstone (their info) in the bucket's stream.
 */

/** The cluster's code bucket: `STATEHOLD_<cluster>_CODE` (stream `OBJ_STATEHOLD_<cluster>_CODE`). */
export const openCodeStore = async (nc: NatsConnection, options: { cluster: string; replicas: number }): Promise<ObjectStore> => {
  const name = `STATEHOLD_${options.cluster}_CODE`;
  // Made (or found) with the short timeout of a node's start; then the same bucket through a client with
  // the default timeout, which its puts and gets of code keep (no second look: it was just made or found).
  await new Objm(jetstream(nc, { timeout: STREAM_OPEN_TIMEOUT_MS })).create(name, {
    replicas: options.replicas,
    storage: StorageType.File,
  });
  return new Objm(jetstream(nc, { checkAPI: false })).open(name, false);
};

/** Code put in the object store, as an operation names it. */
export interface CodeRef {
  object: string;
  /** The object store's digest of the bytes (`SHA-256=<base64url>`): a replaced object is recognized. */
  digest: string;
}

/** A pending upload as it travels in the log: its code is in the object store. */
export type PendingUploadRef = Omit<PendingUpload, 'code'> & { code: CodeRef };

/** A write to the version store as it travels in the cluster's META log: the method and its arguments. */
export type VersionOp =
  | { store: 'versions'; method: 'putPendingUpload'; args: [PendingUploadRef] }
  | { store: 'versions'; method: 'sweepExpiredPendingUploads'; args: [number] }
  | { store: 'versions'; method: 'finalizeVersion'; args: [MachineVersionRecord, CodeRef, boolean] }
  | { store: 'versions'; method: 'finalizeMigration'; args: [MachineVersionMigrationRecord, CodeRef] }
  | { store: 'versions'; method: 'deleteMachineVersions'; args: [string, string] };

const pendingObject = (orgId: string, versionId: string): string => `pending/${orgId}/${versionId}`;
const versionObjectPrefix = (orgId: string, versionId: string): string => `version/${orgId}/${versionId}/`;
const sha256Hex = (code: string): string => createHash('sha256').update(code, 'utf8').digest('hex');
const versionObject = (orgId: string, versionId: string, code: string): string =>
  `${versionObjectPrefix(orgId, versionId)}${sha256Hex(code)}`;
const migrationObject = (orgId: string, migrationId: string, code: string): string =>
  `migration/${orgId}/${migrationId}/${sha256Hex(code)}`;

interface ObjectName {
  kind: 'pending' | 'version' | 'migration';
  /** The version's, the migration's or the pending upload's id. */
  orgId: string;
  versionId: string;
}

/** The parts of one of our object names; undefined for anything else in the bucket. */
const parseObjectName = (name: string): ObjectName | undefined => {
  const [kind, orgId, versionId, ...rest] = name.split('/');
  if (orgId === undefined || versionId === undefined) return undefined;
  if (kind === 'pending' && rest.length === 0) return { kind, orgId, versionId };
  if ((kind === 'version' || kind === 'migration') && rest.length === 1) return { kind, orgId, versionId };
  return undefined;
};

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** What the applier hears when the object store does not answer and it keeps trying. */
export type CodeReadError = (message: string, error: unknown) => void;

/**
 * Reads the code an operation names: undefined when the object is gone or holds other bytes (a later
 * operation superseded this one, see above). The object store's client checks the digest of the bytes
 * it reads against the object's info.
 *
 * A failure to read (NATS unreachable, a timeout) is not an answer: applying the operation without the
 * code, or failing it on this node alone, would make this node's copy differ from the others'. So it
 * retries, stalling this node's log, until the store answers or the connection is closed for good.
 */
const readCode = async (code: ObjectStore, ref: CodeRef, onError: CodeReadError): Promise<string | undefined> => {
  for (let attempt = 0; ; attempt += 1) {
    try {
      const result = await code.get(ref.object);
      if (!result || result.info.digest !== ref.digest) return undefined;
      const chunks: Uint8Array[] = [];
      for await (const chunk of result.data) chunks.push(chunk);
      const error = await result.error;
      if (error) throw error;
      return decoder.decode(Buffer.concat(chunks));
    } catch (error) {
      if (error instanceof ClosedConnectionError || error instanceof DrainingConnectionError) throw error;
      onError(`reading ${ref.object} from the code bucket failed (attempt ${attempt + 1}); retrying`, error);
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
    }
  }
};

/**
 * Applies a version write from the log to this node's local version store (every node, in log order),
 * reading the code the operation names from the object store. Never deletes objects (see above).
 */
export const applyVersionOp =
  (local: VersionStore, code: ObjectStore, onError: CodeReadError = () => {}): ApplyOp<VersionOp> =>
  async (op) => {
    switch (op.method) {
      case 'putPendingUpload': {
        const { code: ref, ...upload } = op.args[0];
        const text = await readCode(code, ref, onError);
        if (text === undefined) return undefined;
        return local.putPendingUpload({ ...upload, code: text });
      }
      case 'sweepExpiredPendingUploads':
        return local.sweepExpiredPendingUploads(...op.args);
      case 'finalizeVersion': {
        const [record, ref, makeCurrent] = op.args;
        // An existing version is left untouched: its code is not needed (and need not be there any more).
        const exists = local.getVersionCode(record.orgId, record.id) !== undefined;
        const text = exists ? '' : ((await readCode(code, ref, onError)) ?? '');
        return local.finalizeVersion(record, text, makeCurrent);
      }
      case 'finalizeMigration': {
        const [record, ref] = op.args;
        const exists = local.getMigrationCode(record.orgId, record.id) !== undefined;
        const text = exists ? '' : ((await readCode(code, ref, onError)) ?? '');
        return local.finalizeMigration(record, text);
      }
      case 'deleteMachineVersions':
        return local.deleteMachineVersions(...op.args);
    }
  };

/**
 * The version store of a cluster node: writes put their code in the cluster's object store, go through
 * the META log (JetStream, replicated) and resolve once applied to this node's LMDB store, with the local
 * result (of two racing finalizes of one version, exactly one gets `created`); reads are answered by the
 * local store, which every node keeps up to date from the log within milliseconds. Objects an operation
 * made useless are deleted here, by the submitter, once its operation was applied.
 */
export class ReplicatedVersionStore implements VersionStore {
  constructor(
    private readonly local: VersionStore,
    private readonly log: JetStreamOpLog<VersionOp>,
    private readonly code: ObjectStore,
    /** Hears cleanups that failed: the write itself is done, the object is left behind (a leak). */
    private readonly onError: (message: string, error: unknown) => void,
  ) {}

  getVersion(orgId: string, machine: string, versionId: string): MachineVersionRecord | undefined {
    return this.local.getVersion(orgId, machine, versionId);
  }

  getVersionCode(orgId: string, versionId: string): string | undefined {
    return this.local.getVersionCode(orgId, versionId);
  }

  listVersions(orgId: string, machine: string, after: VersionCursor | undefined, limit: number): MachineVersionRecord[] {
    return this.local.listVersions(orgId, machine, after, limit);
  }

  pendingUploadsOf(orgId: string, now: number): Array<{ versionId: string; chars: number }> {
    return this.local.pendingUploadsOf(orgId, now);
  }

  getPendingUpload(orgId: string, versionId: string): PendingUpload | undefined {
    return this.local.getPendingUpload(orgId, versionId);
  }

  async putPendingUpload(upload: PendingUpload): Promise<void> {
    const { code, ...rest } = upload;
    // The machine and expiry go along as object metadata: the cleanups below find the objects by them.
    const info = await this.code.putBlob(
      { name: pendingObject(upload.orgId, upload.versionId), metadata: { machine: upload.machine, expiresAt: String(upload.expiresAt) } },
      encoder.encode(code),
    );
    await this.submit({
      store: 'versions',
      method: 'putPendingUpload',
      args: [{ ...rest, code: { object: info.name, digest: info.digest } }],
    });
  }

  async sweepExpiredPendingUploads(now: number): Promise<number> {
    const swept = (await this.submit({ store: 'versions', method: 'sweepExpiredPendingUploads', args: [now] })) as number;
    // Listing the bucket costs a read of every object's info: only when something expired here.
    if (swept > 0) await this.dropObjects((object) => object.kind === 'pending' && Number(object.metadata.expiresAt) < now);
    return swept;
  }

  async finalizeVersion(record: MachineVersionRecord, code: string, makeCurrent: boolean): Promise<FinalizeResult> {
    const name = versionObject(record.orgId, record.id, code);
    const info = await this.code.putBlob({ name }, encoder.encode(code));
    const result = (await this.submit({
      store: 'versions',
      method: 'finalizeVersion',
      args: [record, { object: name, digest: info.digest }, makeCurrent],
    })) as FinalizeResult;
    await this.cleanUp(async () => {
      if (result.kind === 'created') {
        if (!this.local.getPendingUpload(record.orgId, record.id)) await this.code.delete(pendingObject(record.orgId, record.id));
        return;
      }
      // Nothing was written: our object is useless unless the stored version has the very same bytes
      // (then it is the same object, named by the operation that created the version).
      const stored = result.kind === 'existing' ? this.local.getVersionCode(record.orgId, record.id) : undefined;
      if (stored === undefined || versionObject(record.orgId, record.id, stored) !== name) await this.code.delete(name);
    });
    return result;
  }

  getMigration(orgId: string, machine: string, migrationId: string): MachineVersionMigrationRecord | undefined {
    return this.local.getMigration(orgId, machine, migrationId);
  }

  getMigrationCode(orgId: string, migrationId: string): string | undefined {
    return this.local.getMigrationCode(orgId, migrationId);
  }

  listMigrations(orgId: string, machine: string): MachineVersionMigrationRecord[] {
    return this.local.listMigrations(orgId, machine);
  }

  /** As finalizeVersion; the object carries its machine, by which machine deletion finds it. */
  async finalizeMigration(record: MachineVersionMigrationRecord, code: string): Promise<FinalizeMigrationResult> {
    const name = migrationObject(record.orgId, record.id, code);
    const info = await this.code.putBlob({ name, metadata: { machine: record.machine } }, encoder.encode(code));
    const result = (await this.submit({
      store: 'versions',
      method: 'finalizeMigration',
      args: [record, { object: name, digest: info.digest }],
    })) as FinalizeMigrationResult;
    await this.cleanUp(async () => {
      if (result.kind === 'created') {
        if (!this.local.getPendingUpload(record.orgId, record.id)) await this.code.delete(pendingObject(record.orgId, record.id));
        return;
      }
      const stored = result.kind === 'existing' ? this.local.getMigrationCode(record.orgId, record.id) : undefined;
      if (stored === undefined || migrationObject(record.orgId, record.id, stored) !== name) await this.code.delete(name);
    });
    return result;
  }

  async deleteMachineVersions(orgId: string, machine: string): Promise<string[]> {
    const removed = (await this.submit({ store: 'versions', method: 'deleteMachineVersions', args: [orgId, machine] })) as string[];
    const gone = new Set(removed);
    // A migration object goes by its machine unless the migration is here again (the machine was made
    // again and the migration finalized since this deletion was applied).
    await this.dropObjects((object) => {
      if (object.orgId !== orgId) return false;
      if (object.kind === 'version') return gone.has(object.versionId);
      if (object.kind === 'migration')
        return object.metadata.machine === machine && !this.local.getMigration(orgId, machine, object.versionId);
      return object.metadata.machine === machine;
    });
    return removed;
  }

  /**
   * Lists the bucket and deletes the objects that match, except a pending upload still in the local
   * store: one re-uploaded since, whose operation is applied here already, stays. (Listing reads every
   * object's info: it is for the rare cleanups, machine deletion and sweeps that removed something.)
   */
  private dropObjects(matches: (object: ObjectName & { metadata: Record<string, string> }) => boolean): Promise<void> {
    return this.cleanUp(async () => {
      for (const info of await this.code.list()) {
        const object = parseObjectName(info.name);
        if (!object || !matches({ ...object, metadata: info.metadata ?? {} })) continue;
        if (object.kind === 'pending' && this.local.getPendingUpload(object.orgId, object.versionId)) continue;
        await this.code.delete(info.name);
      }
    });
  }

  /** Cleanups run after the write is applied and must not fail it: a failed one only leaves an object behind. */
  private async cleanUp(work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      this.onError('deleting code objects no longer needed failed', error);
    }
  }

  private submit(op: VersionOp): Promise<unknown> {
    return this.log.submit(op);
  }
}
