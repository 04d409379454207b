import type { Logger } from '../domain/logger.js';
import type { InstanceStore, OutboxMessage } from '../store/instance-store.js';
import { actorKey } from './actor-key.js';
import type { LogSink } from './log-sink.js';

interface OutboxDispatcherOptions {
  store: InstanceStore;
  deliver: (message: OutboxMessage) => Promise<void>;
  logs: LogSink;
  logger: Logger;
  retryDelayMs: number;
  maxRetries: number;
  /**
   * In a cluster, every node holds every outbox entry, and only the sender's owner delivers: the others
   * skip the entry (and look again a second later: they may own the sender by then).
   */
  shouldDispatch?: (message: OutboxMessage) => boolean;
  /** Test-only: called between the receiver's commit and the outbox removal. */
  afterDelivered?: () => void;
}

/** Outbox entries read per look. */
const BATCH = 1_000;

/**
 * Delivers messages between instances. Messages to one target go one at a time in outbox order (a
 * spawn before the events for the child; the order holds within the first BATCH entries of the
 * outbox, which is normally near empty); different targets proceed in parallel. A delivery that
 * fails is retried after a delay, up to the retry limit, then dropped with a line in the sender's logs.
 */
export class OutboxDispatcher {
  private readonly busy = new Set<string>();
  private wake: NodeJS.Timeout | undefined;
  private kickQueued = false;
  private stopped = false;

  constructor(private readonly options: OutboxDispatcherOptions) {}

  start(): void {
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    if (this.wake) clearTimeout(this.wake);
  }

  /**
   * Something was committed to the outbox, or a worker finished: look for waiting targets soon. Kicks
   * of one turn are coalesced, and the scan runs outside the committing request.
   */
  kick(): void {
    if (this.stopped || this.kickQueued) return;
    this.kickQueued = true;
    setImmediate(() => {
      this.kickQueued = false;
      try {
        this.scan();
      } catch (error) {
        this.options.logger.error('outbox dispatcher failed to read the outbox', { error: String(error) });
        this.schedule(1_000);
      }
    });
  }

  private scan(): void {
    if (this.stopped) return;
    const now = Date.now();
    let nextWake: number | undefined;
    const seen = new Set<string>();
    for (const message of this.options.store.listOutbox(BATCH)) {
      const target = targetKey(message);
      if (seen.has(target)) continue;
      seen.add(target);
      if (this.busy.has(target)) continue;
      if (this.options.shouldDispatch && !this.options.shouldDispatch(message)) {
        nextWake = Math.min(nextWake ?? Infinity, now + 1_000);
        continue;
      }
      if (message.nextAttemptAt > now) {
        nextWake = Math.min(nextWake ?? Infinity, message.nextAttemptAt);
        continue;
      }
      void this.work(target).catch((error: unknown) =>
        this.options.logger.error('outbox delivery failed', { target, error: String(error) }),
      );
    }
    if (nextWake !== undefined) this.schedule(nextWake - now);
  }

  private schedule(delayMs: number): void {
    if (this.wake) clearTimeout(this.wake);
    this.wake = setTimeout(() => this.kick(), Math.max(0, delayMs));
  }

  /** Delivers the target's messages in order until none is due or one fails. */
  private async work(target: string): Promise<void> {
    this.busy.add(target);
    try {
      for (;;) {
        if (this.stopped) return;
        const message = this.options.store.listOutbox(BATCH).find((m) => targetKey(m) === target);
        if (!message || message.nextAttemptAt > Date.now()) return;
        try {
          await this.options.deliver(message);
          this.options.afterDelivered?.();
          await this.options.store.removeOutbox(message);
        } catch (error) {
          await this.failed(message, error).catch((failure: unknown) =>
            this.options.logger.error('could not record a failed outbox delivery', { target, error: String(failure) }),
          );
          return;
        }
      }
    } finally {
      this.busy.delete(target);
      this.kick();
    }
  }

  private async failed(message: OutboxMessage, error: unknown): Promise<void> {
    const reason = error instanceof Error ? error.message : String(error);
    const attempts = message.attempts + 1;
    const what =
      message.kind === 'spawn'
        ? `spawn of ${message.to.machine}/${message.to.name}`
        : `event ${String(message.event?.type)} to ${message.to.machine}/${message.to.name}`;
    const { logs, store } = this.options;
    // (the lines go under the sender's version, as its other lines do; its owner holds its head)
    const versionId = store.getInstance(message.orgId, message.from.machine, message.from.name)?.versionId;
    if (attempts > this.options.maxRetries) {
      logs.service(
        message.orgId,
        message.from.machine,
        message.from.name,
        'error',
        `dropped ${what} after ${attempts} failed deliveries: ${reason}`,
        { messageId: message.id },
        versionId,
      );
      await this.options.store.removeOutbox(message);
      return;
    }
    logs.service(
      message.orgId,
      message.from.machine,
      message.from.name,
      'warn',
      `could not deliver ${what} (attempt ${attempts}): ${reason}; retrying in ${this.options.retryDelayMs} ms`,
      { messageId: message.id },
      versionId,
    );
    await this.options.store.updateOutbox({ ...message, attempts, nextAttemptAt: Date.now() + this.options.retryDelayMs });
  }
}

const targetKey = (message: OutboxMessage): string => actorKey(message.orgId, message.to.machine, message.to.name);
