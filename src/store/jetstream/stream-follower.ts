import { type ConsumerMessages, DeliverPolicy, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';

export interface StreamFollowerOptions {
  js: JetStreamClient;
  stream: string;
  /** The first sequence not handled yet: asked again each time the follower (re)starts. */
  next: () => number;
  /** Handles one message, in stream order; its failure is reported and the follower goes on. */
  handle: (message: JsMsg) => Promise<void>;
  onError: (message: string, error: unknown) => void;
}

/** Wait before following again after the consumer ended (a server lost, heartbeats missed). */
const RESTART_MS = 250;

/**
 * Follows a stream from a sequence, in order, for as long as it is not stopped: an ordered consumer,
 * made again from the first unhandled sequence whenever it ends or fails (the nats-server it was on
 * died, the connection moved), so a node's copy never silently stops being fed.
 */
export class StreamFollower {
  private messages: ConsumerMessages | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly options: StreamFollowerOptions) {}

  /** Resolves once the first consumer exists (messages then arrive in the background). */
  async start(): Promise<void> {
    await this.open();
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.messages?.close();
    await this.loop;
  }

  private async open(): Promise<void> {
    const { js, stream, next } = this.options;
    const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, next()) });
    this.messages = await consumer.consume();
  }

  private async run(): Promise<void> {
    for (;;) {
      try {
        if (!this.messages) await this.open();
        for await (const message of this.messages as ConsumerMessages) {
          if (message.seq < this.options.next()) continue;
          try {
            await this.options.handle(message);
          } catch (error) {
            this.options.onError(`could not apply entry ${message.seq} of ${this.options.stream}`, error);
          }
        }
      } catch (error) {
        if (!this.stopped) this.options.onError(`stopped following ${this.options.stream}; following again`, error);
      }
      this.messages = undefined;
      if (this.stopped) return;
      await new Promise((resolve) => setTimeout(resolve, RESTART_MS));
      if (this.stopped) return;
    }
  }
}
