/**
 * The lazy upgrade's commit (wire-protocol §8.5): an instance with a desired version runs the migration
 * chain (instance-upgrader.ts) when the next event or delayed event reaches it, in its mailbox, and
 * commits the upgrade record on the new version before that event runs.
 */
import { machineCodeFailed, ServiceError } from '../domain/errors.js';
import { changedIndexes } from '../domain/index-values.js';
import type { InstanceHead } from '../store/instance-store.js';
import { dropHeadOnConflict } from './actor-heads.js';
import { billedTransitions } from './commit-records.js';
import type { InstanceActor } from './instance-actor.js';
import { InstanceUpgrader } from './instance-upgrader.js';
import { asRequestError } from './request-retries.js';
import type { RuntimeParts } from './runtime-parts.js';
import type { TransitionPipeline } from './transition-pipeline.js';
import { InvalidUpgradePathError } from './upgrade-state.js';

export class LazyUpgrade {
  private readonly upgrader: InstanceUpgrader;

  constructor(
    private readonly parts: RuntimeParts,
    private readonly pipeline: TransitionPipeline,
  ) {
    const { deps, clock, indexer } = parts;
    this.upgrader = new InstanceUpgrader({ ...deps, clock, limits: deps.settings, index: (head) => indexer.index(head) });
  }

  /**
   * Inside the mailbox, from a settled state (every commit is): the head upgraded to its desired version
   * and committed, or `head` when none is pending. A migration that throws or gives paths that make no
   * state of the new machine fails the event and leaves the instance on its version; it is logged.
   */
  async ifDue(actor: InstanceActor, head: InstanceHead): Promise<InstanceHead> {
    const target = head.targetVersionId;
    if (target === undefined || target === head.versionId) return head;
    const { deps, usage } = this.parts;
    const { orgId, machine, name } = actor;
    const from = head.versionId;
    try {
      const { records, next, size, migrationIds } = await this.upgrader.plan(actor, head, target);
      const startedAt = performance.now();
      const billed = billedTransitions(1, size.contextBytes, changedIndexes(head.indexValues, next.indexValues));
      await usage.countedIfMadeLate(deps.instances.commit(next, head, records, {}), orgId, machine, billed);
      deps.meters?.committed(records.length, (performance.now() - startedAt) / 1000);
      usage.transitions(orgId, machine, billed);
      this.pipeline.committed(actor, next, size.stateBytes, []);
      deps.logs.service(
        orgId,
        machine,
        name,
        'info',
        `upgraded from ${from} to ${target} (migrations ${migrationIds.join(', ')})`,
        {},
        target,
      );
      return next;
    } catch (error) {
      actor.discardLive();
      dropHeadOnConflict(actor, error);
      const failure =
        error instanceof InvalidUpgradePathError
          ? machineCodeFailed(error.message)
          : asRequestError(error, `${orgId}/${machine}/${name}`, deps.logger);
      if (!(failure instanceof ServiceError) || failure.status >= 500) throw failure;
      const message = `upgrading from ${from} to ${target} failed, the instance stays on ${from}: ${failure.message}`;
      deps.logs.service(orgId, machine, name, 'error', message, {}, from);
      throw new ServiceError(failure.status, failure.code, message, failure.parameter);
    }
  }
}
