import type { CommitEffects, InstanceStore, OutboxMessage } from '../instance-store.js';

/**
 * The outbox entries a node's copy holds (its senders' messages still to deliver) by message id, and
 * the receivers' commits that name messages: a message a receiver applied goes from its sender's
 * outbox here. The owner's dispatcher removes what it delivered itself; this covers the entries a
 * partition's catch-up brings back, whether the sender's commit is replayed after the receiver's
 * (partitions are followed side by side) or before it.
 */
export class DeliveredMessages {
  /** Where each outbox entry of this copy is, by message id (found without scanning the outbox). */
  private outboxPositions: Map<string, [number, number]> | undefined;
  /** Messages whose receiver's commit was applied here before their sender's: dropped once that is applied. */
  private readonly deliveredEarly = new Set<string>();

  constructor(
    private readonly local: Pick<InstanceStore, 'listOutbox' | 'removeOutbox'>,
    private readonly onError: (message: string, error: unknown) => void,
  ) {}

  /** A receiver's commit that applied `messageId` was applied here. */
  delivered(messageId: string | undefined): void {
    if (messageId === undefined) return;
    const position = this.positions().get(messageId);
    if (!position) {
      this.deliveredEarly.add(messageId);
      if (this.deliveredEarly.size > DELIVERED_KEPT) this.deliveredEarly.delete(this.deliveredEarly.values().next().value as string);
      return;
    }
    this.remove(messageId, position);
  }

  /** Before a commit with outbox entries is applied here: where they are. */
  sending(effects: CommitEffects): void {
    if (!effects.outbox?.length) return;
    const positions = this.positions();
    for (const message of effects.outbox) positions.set(message.id, message.position);
  }

  /** After a commit with outbox entries is applied: the ones whose receivers applied them already go. */
  sent(effects: CommitEffects): void {
    if (this.deliveredEarly.size === 0 || !effects.outbox?.length) return;
    for (const message of effects.outbox) if (this.deliveredEarly.has(message.id)) this.remove(message.id, message.position);
  }

  /** An entry removed otherwise (delivered by this node, or its partition dropped). */
  forget(messageId: string): void {
    this.outboxPositions?.delete(messageId);
  }

  private remove(messageId: string, position: [number, number]): void {
    this.outboxPositions?.delete(messageId);
    this.deliveredEarly.delete(messageId);
    const message = { id: messageId, position } as OutboxMessage;
    this.local
      .removeOutbox(message)
      .catch((error: unknown) => this.onError(`could not drop delivered message ${messageId} from the outbox`, error));
  }

  /** The outbox's positions by message id, read whole once (it holds what is still to deliver: few). */
  private positions(): Map<string, [number, number]> {
    this.outboxPositions ??= new Map(this.local.listOutbox(Number.MAX_SAFE_INTEGER).map((message) => [message.id, message.position]));
    return this.outboxPositions;
  }
}

/** Receivers' commits remembered whose senders' entries were not applied here yet. */
const DELIVERED_KEPT = 10_000;
