/**
 * Messages from other instances (wire-protocol §7.4), as the outbox dispatcher delivers them: a
 * persistent spawn creates the child, a send delivers its event (creating the target with its default
 * context when it does not exist yet). Each is applied once: a redelivery after a crash is
 * acknowledged without applying it again. Instances that machine code makes are bounded in depth and
 * in rate per org.
 */
import { conflict, notFound, unavailable } from '../domain/errors.js';
import type { MachineEvent } from '../domain/machine-state.js';
import { eventShapeProblem } from '../domain/reserved-events.js';
import type { OutboxMessage } from '../store/instance-store.js';
import type { ActorHeads } from './actor-heads.js';
import type { EventDelivery } from './event-delivery.js';
import type { InstanceCreation } from './instance-creation.js';
import { TokenBuckets } from './rate-limit.js';
import type { RuntimeParts } from './runtime-parts.js';

/**
 * Instances that machine code makes (a persistent spawn, or a message to an instance that does not
 * exist yet) may make others in turn, without end: a machine that spawns a child of its own kind on
 * entry made ≈ 240 instances a second until its version was replaced. Chains are cut at this depth.
 */
const MAX_MADE_DEPTH = 100;

export class MessageReceipt {
  /** Instances machine code made, per org (see receive). */
  private readonly madeInstances: TokenBuckets;

  constructor(
    private readonly parts: RuntimeParts,
    private readonly heads: ActorHeads,
    private readonly creation: InstanceCreation,
    private readonly delivery: EventDelivery,
  ) {
    const perSecond = parts.deps.settings.madeInstancesPerSecond;
    this.madeInstances = new TokenBuckets(perSecond, perSecond * 10);
  }

  /** Applies the message in its target's mailbox (see the file's comment). */
  receive(message: OutboxMessage): Promise<void> {
    const { actors, deps, retries } = this.parts;
    const { orgId } = message;
    const { machine, name } = message.to;
    const actor = actors.obtain(orgId, machine, name);
    return actor.enqueue(() =>
      retries.untilNotMoved(async () => {
        if (deps.instances.hasReceived(orgId, machine, name, message.id)) return;
        const authContext = { stateBackedSender: { machineName: message.from.machine, machineInstanceName: message.from.name } };
        this.heads.dropStale(actor);
        let head = actor.head ?? deps.instances.getInstance(orgId, machine, name);
        if (message.kind === 'spawn' && head) {
          await deps.instances.markReceived(orgId, machine, name, message.id);
          return;
        }
        // (sends are checked as they leave their step, step-result.ts; one queued before that check was not)
        const shape = message.kind === 'send' && message.event ? eventShapeProblem(message.event) : undefined;
        if (shape !== undefined) {
          deps.logs.service(
            orgId,
            message.from.machine,
            message.from.name,
            'warn',
            `message to ${machine}/${name} dropped: ${shape}`,
            { machine, instance: name },
            this.senderVersion(message),
          );
          await deps.instances.markReceived(orgId, machine, name, message.id);
          return;
        }
        const madeDepth = head
          ? 0
          : (message.fromMadeDepth ?? this.heads.head(orgId, message.from.machine, message.from.name)?.madeDepth ?? 0) + 1;
        // Depth alone does not bound a machine that makes two of its own kind: the org's rate does.
        if (!head && !this.madeInstances.take(orgId)) {
          throw unavailable(
            `machine code in this org made more than ${deps.settings.madeInstancesPerSecond} instances a second (--made-instances-per-second)`,
          );
        }
        if (madeDepth > MAX_MADE_DEPTH) {
          const what =
            message.kind === 'spawn' ? 'spawn' : `message ${(message.event as MachineEvent | undefined)?.type ?? ''} to a new instance`;
          deps.logs.service(
            orgId,
            message.from.machine,
            message.from.name,
            'warn',
            `${what} ${machine}/${name} refused: instances made by instances are limited to ${MAX_MADE_DEPTH} in a row`,
            { machine, instance: name },
            this.senderVersion(message),
          );
          await deps.instances.markReceived(orgId, machine, name, message.id);
          return;
        }
        if (message.kind === 'spawn') {
          const versionId = this.versionFor(orgId, machine, message.spawn?.versionId);
          await this.creation.createWithin(actor, {
            orgId,
            machine,
            name,
            versionId,
            context: message.spawn?.context ?? {},
            authContext,
            parent: message.from,
            receivedMessageId: message.id,
            madeDepth,
          });
          return;
        }
        head ??= await this.creation.createWithin(actor, {
          orgId,
          machine,
          name,
          versionId: this.versionFor(orgId, machine, undefined),
          context: {},
          authContext,
          madeDepth,
        });
        await this.delivery.deliver(actor, head, message.event as MachineEvent, authContext, { receivedMessageId: message.id });
      }),
    );
  }

  /** The version a new instance of `machine` gets when another instance creates it. */
  private versionFor(orgId: string, machine: string, requested: string | undefined): string {
    const { deps } = this.parts;
    const record = deps.machines.getMachine(orgId, machine);
    if (!record) throw notFound(`machine ${machine} does not exist`);
    if (requested !== undefined) {
      if (!deps.versions.getVersion(orgId, machine, requested)) throw notFound(`machine ${machine} has no version ${requested}`);
      return requested;
    }
    if (!record.currentVersionId) throw conflict(`machine ${machine} has no current version`);
    return record.currentVersionId;
  }

  /** The sender's version, for the lines logged under it (undefined when its head is not known here). */
  private senderVersion(message: OutboxMessage): string | undefined {
    return this.heads.head(message.orgId, message.from.machine, message.from.name)?.versionId;
  }
}
