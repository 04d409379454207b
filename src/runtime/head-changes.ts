/**
 * Changes to an instance that record no transition, each in the instance's mailbox and fenced like a
 * commit: its status (a paused instance rejects events and drops its delayed events' deliveries), the
 * version it is to be upgraded to, and its deletion.
 */
import { noMigrationPath } from '../domain/errors.js';
import { migrationPath } from '../domain/migration-path.js';
import type { InstanceHead, InstanceStatus } from '../store/instance-store.js';
import { type ActorHeads, dropHeadOnConflict } from './actor-heads.js';
import { asRequestError } from './request-retries.js';
import type { RuntimeParts } from './runtime-parts.js';

export class HeadChanges {
  constructor(
    private readonly parts: RuntimeParts,
    private readonly heads: ActorHeads,
  ) {}

  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void> {
    const actor = this.parts.actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      const head = this.heads.load(actor);
      if (head.status === status) return;
      const next = { ...head, status };
      await this.heads.replace(actor, head, next);
    });
  }

  /**
   * Records the version the instance is to be upgraded to, once a chain of migrations leads there
   * from its version. Checked here, in the instance's mailbox, so that the version it is checked
   * against is the one the head has when the target is written. The instance's own version clears
   * any pending target (nothing to upgrade). A head-only change: no transition is recorded.
   */
  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void> {
    const { actors, deps } = this.parts;
    const actor = actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      const head = this.heads.load(actor);
      let next: InstanceHead;
      if (targetVersionId === head.versionId) {
        if (head.targetVersionId === undefined) return;
        const { targetVersionId: _cleared, ...rest } = head;
        next = rest;
      } else {
        if (head.targetVersionId === targetVersionId) return;
        if (!migrationPath(deps.versions.listMigrations(orgId, machine), head.versionId, targetVersionId)) {
          throw noMigrationPath(head.versionId, targetVersionId);
        }
        next = { ...head, targetVersionId };
      }
      await this.heads.replace(actor, head, next);
    });
  }

  /** Removes the instance with its history; published as deleted. */
  delete(orgId: string, machine: string, name: string): Promise<boolean> {
    const { actors, deps } = this.parts;
    const actor = actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      let deleted: boolean;
      try {
        deleted = await deps.instances.deleteInstance(orgId, machine, name);
      } catch (error) {
        // (a cluster's delete fenced by another node's write: the instance changed, so it is kept)
        dropHeadOnConflict(actor, error);
        throw asRequestError(error, `${orgId}/${machine}/${name}`, deps.logger);
      }
      actor.head = undefined;
      actor.discardLive();
      actors.release(actor);
      if (deleted) deps.updates?.publish({ kind: 'deleted', orgId, machine, name });
      return deleted;
    });
  }
}
