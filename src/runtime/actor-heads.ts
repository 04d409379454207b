/**
 * An actor's committed head as its tasks see it: held in memory, reloaded from the store when the
 * store has a later one (a cluster node's copy got another node's commits), dropped when a write found
 * that the stored head moved under it, replaced by head-only changes.
 */
import { InstanceNotFoundError } from '../domain/errors.js';
import { type InstanceHead, RequestMovedError, SequenceConflictError } from '../store/instance-store.js';
import type { InstanceActor } from './instance-actor.js';
import { asRequestError } from './request-retries.js';
import type { RuntimeParts } from './runtime-parts.js';

/**
 * A head that moved under us (another writer) is reloaded by the next task, not retried forever; so is
 * one of a request that moved (this node no longer holds the instance, or another node took the request).
 */
export const dropHeadOnConflict = (actor: InstanceActor, error: unknown): void => {
  if (error instanceof SequenceConflictError || error instanceof RequestMovedError) {
    actor.head = undefined;
    actor.discardLive();
  }
};

export class ActorHeads {
  constructor(private readonly parts: RuntimeParts) {}

  /** The committed head, from memory when the actor is held (and the store has none later), else from the store. */
  head(orgId: string, machine: string, name: string): InstanceHead | undefined {
    const { actors, deps } = this.parts;
    const held = actors.peek(orgId, machine, name)?.head;
    if (held && deps.instances.isCurrent?.(held) !== false) return held;
    return deps.instances.getInstance(orgId, machine, name);
  }

  /**
   * Inside the actor's mailbox, before its held head is used: a head the store has a later one of
   * (a cluster node's copy got another node's commits, after a pause or while another node owned the
   * instance) is dropped, with the live interpreter, and the store's is loaded in its place.
   */
  dropStale(actor: InstanceActor): void {
    if (actor.head && this.parts.deps.instances.isCurrent?.(actor.head) === false) {
      actor.head = undefined;
      actor.discardLive();
    }
  }

  /** Inside the mailbox: the actor's current head, or 404 (and the actor let go) when the instance does not exist. */
  load(actor: InstanceActor): InstanceHead {
    this.dropStale(actor);
    actor.head ??= this.parts.deps.instances.getInstance(actor.orgId, actor.machine, actor.name);
    if (!actor.head) {
      this.parts.actors.release(actor);
      throw new InstanceNotFoundError(actor.machine, actor.name);
    }
    return actor.head;
  }

  /** A head-only change (status, desired version), fenced like a commit; inside the actor's mailbox. */
  async replace(actor: InstanceActor, head: InstanceHead, next: InstanceHead): Promise<void> {
    try {
      await this.parts.deps.instances.replaceHead(next, head);
    } catch (error) {
      dropHeadOnConflict(actor, error);
      throw asRequestError(error, `${actor.orgId}/${actor.machine}/${actor.name}`, this.parts.deps.logger);
    }
    actor.head = next;
  }
}
