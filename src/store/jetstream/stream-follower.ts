import { type ConsumerMessages, DeliverPolicy, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';

interface StreamFollowerOptions {
  js: JetStreamClient;
  stream: string;
  /** Only the entries on these subjects (a partition's `…tx.<p>.>`); every entry when not given. */
  filter?: string;
  /** The stream sequence of the last entry the follower is to see (its filter's); the whole stream's when not given. */
  lastSeq?: () => Promise<number>;
  /** The first sequence not handled yet: asked again each time the follower (re)starts. */
  next: () => number;
  /** Handles one message, in stream order; its failure is reported and the follower goes on. */
  handle: (message: JsMsg) => Promise<void>;
  onError: (message: string, error: unknown) => void;
}

/** Wait before following again after the consumer ended (a server lost, heartbeats missed). */
const RESTART_MS = 250;
/** How often the follower checks that it is not stuck behind its stream. */
const STALL_CHECK_MS = 2_000;

/**
 * Follows a stream from a sequence, in order, for as long as it is not stopped: an ordered consumer,
 * made again from the first unhandled sequence whenever it ends or fails (the nats-server it was on
 * died, the connection moved), so a node's copy never silently stops being fed.
 */
export class StreamFollower {
  private messages: ConsumerMessages | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  /** `next()` at the last stall check. */
  private lastNext = 0;
  /** Set by restart: what the consumer still delivers is passed by until a new one starts from `next()`. */
  private restarting = false;

  constructor(private readonly options: StreamFollowerOptions) {}

  /** Resolves once the first consumer exists (messages then arrive in the background). */
  async start(): Promise<void> {
    await this.open();
    this.loop = this.run();
    this.watchdog = setInterval(() => void this.checkStalled(), STALL_CHECK_MS);
    this.watchdog.unref();
  }

  /**
   * Follows again from `next()` (which its owner moved back, to an entry it could not apply): the
   * consumer is closed, what it still delivers is passed by, and a new one starts from there.
   */
  restart(): void {
    if (this.stopped || this.restarting) return;
    this.restarting = true;
    void this.messages?.close();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.watchdog);
    await this.messages?.close();
    await this.loop;
  }

  /**
   * A consumer whose nats-server died may neither deliver nor end (seen with a JetStream cluster losing
   * a server): when the stream holds entries past what was handled and nothing came since the last
   * check, the consumer is closed, and the loop makes a new one from the first unhandled sequence.
   */
  private async checkStalled(): Promise<void> {
    const next = this.options.next();
    const moved = next !== this.lastNext;
    this.lastNext = next;
    if (moved || this.stopped || !this.messages) return;
    try {
      const last = this.options.lastSeq
        ? await this.options.lastSeq()
        : (await (await this.options.js.jetstreamManager()).streams.info(this.options.stream)).state.last_seq;
      if (last >= next && this.options.next() === next) {
        this.options.onError(`following ${this.options.stream} stalled at ${next - 1} of ${last}`, new Error('no entry for a while'));
        await this.messages?.close();
      }
    } catch {
      // (the stream is not reachable now: the next check tries again)
    }
  }

  private async open(): Promise<void> {
    const { js, stream, next, filter } = this.options;
    const consumer = await js.consumers.get(stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, next()),
      // (one subject as a string: a 2.9 server takes one filter subject per consumer, and the client checks)
      ...(filter === undefined ? {} : { filter_subjects: filter }),
    });
    this.messages = await consumer.consume();
    this.restarting = false;
  }

  private async run(): Promise<void> {
    for (;;) {
      try {
        if (!this.messages) await this.open();
        for await (const message of this.messages as ConsumerMessages) {
          if (this.restarting || message.seq < this.options.next()) continue;
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
