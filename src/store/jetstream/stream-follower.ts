import { type ConsumerMessages, DeliverPolicy, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/transport-node';
import { firstMessageFrom } from './stream-gets.js';

/** What a follower hands on: a consumer's message, or an entry read from the stream itself (readBehind). */
export interface FollowedMessage {
  readonly seq: number;
  readonly subject: string;
  readonly headers?: MsgHdrs | undefined;
  json<T>(): T;
}

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
  handle: (message: FollowedMessage) => Promise<void>;
  onError: (message: string, error: unknown) => void;
}

/**
 * Wait before following again after the consumer ended (a server lost, heartbeats missed), doubled
 * after each failure in a row up to the most: a node cut off from NATS for long asks little (its
 * nats-server runs every question the client gave up on, and holds up the later ones with them).
 */
const RESTART_MS = 250;
const MAX_RESTART_MS = 4_000;
/** How often the follower checks that it is not stuck behind its stream. */
const STALL_CHECK_MS = 2_000;
/** At most this many entries read one by one from the stream after a stall, before following again. */
const MAX_READS_BEHIND = 10_000;

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
  /**
   * Where to read up to before following again: the stream's last sequence at a stall check, or its
   * last when read (`last`) after a consumer could not be made or failed.
   */
  private behindTo: number | 'last' | undefined;

  /** Made once, without the client's account check (a request of its own each time it is made). */
  private jsm: Promise<JetStreamManager> | undefined;

  /** Set by readSoon: the entries asked for are read before anything else, without the pause between consumers. */
  private hurried = false;
  /** Ends the pause between consumers early (set while the loop pauses). */
  private endPause: (() => void) | undefined;

  constructor(private readonly options: StreamFollowerOptions) {}

  /**
   * Resolves once the first consumer exists (messages then arrive in the background), or once it could
   * not be made: the follower then reads the stream's entries one by one meanwhile, and makes one again.
   */
  async start(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.open();
    } catch (error) {
      this.options.onError(`could not follow ${this.options.stream} yet; reading its entries meanwhile`, error);
      this.behindTo = 'last';
    }
    // (stopped while the consumer was made, or failed to be: it goes, and no loop starts)
    if (this.stopped) {
      await this.messages?.close();
      return;
    }
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

  /**
   * Someone waits for the entries up to `seq`, which the stream holds, and the consumer has not brought
   * them: they are read from the stream now (readBehind), as after a stall, without waiting for the
   * stall check or out the pause before the next consumer. After a nats-server was lost, consumers
   * could not be made or delivered nothing for many seconds while the stream answered reads; each
   * append to a partition taken over then waited 2 s for its own entry (cluster/README.md, What is left, 14).
   */
  readSoon(seq: number): void {
    if (this.stopped || this.options.next() > seq) return;
    this.readBehindTo(seq);
    this.hurried = true;
    this.endPause?.();
    void this.messages?.close();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.endPause?.();
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
      const last = await this.lastSeq();
      if (last >= next && this.options.next() === next) {
        this.options.onError(`following ${this.options.stream} stalled at ${next - 1} of ${last}`, new Error('no entry for a while'));
        this.readBehindTo(last);
        await this.messages?.close();
      }
    } catch {
      // (the stream is not reachable now: the next check tries again)
    }
  }

  /** The entries up to `to` are read from the stream before the next consumer: the furthest asked for wins. */
  private readBehindTo(to: number): void {
    const behind = this.behindTo;
    this.behindTo = behind === 'last' ? 'last' : Math.max(behind ?? 0, to);
  }

  private async lastSeq(): Promise<number> {
    return this.options.lastSeq ? this.options.lastSeq() : (await (await this.manager()).streams.info(this.options.stream)).state.last_seq;
  }

  private manager(): Promise<JetStreamManager> {
    this.jsm ??= this.options.js.jetstreamManager(false);
    return this.jsm;
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

  /**
   * After a stall, or a consumer that could not be made or failed, the entries up to the stream's last
   * sequence are read one by one from the stream (its leader answers) before a new consumer is made.
   * After a nats-server was lost, making a consumer timed out again and again for seconds (the
   * JetStream cluster's meta leader elected anew), and a consumer made then delivered one entry per
   * restart (cluster/README.md, What is left, 14): reads need neither.
   */
  private async readBehind(): Promise<void> {
    const wanted = this.behindTo;
    this.behindTo = undefined;
    if (wanted === undefined) return;
    const to = wanted === 'last' ? await this.lastSeq() : wanted;
    const jsm = await this.manager();
    for (let reads = 0; reads < MAX_READS_BEHIND && !this.stopped; reads++) {
      const next = this.options.next();
      if (next > to) return;
      const message = await firstFrom(jsm, this.options.stream, next, this.options.filter);
      // (the follower was sent back meanwhile, an apply having failed: what was read is after where it goes on from)
      if (this.options.next() !== next) continue;
      if (!message || message.seq > to) return;
      await this.options.handle(message);
    }
  }

  private async run(): Promise<void> {
    let failures = 0;
    for (;;) {
      try {
        await this.readBehind();
        if (!this.messages) await this.open();
        failures = 0;
        for await (const message of this.messages as ConsumerMessages) {
          if (this.stopped) break;
          if (this.restarting || message.seq < this.options.next()) continue;
          try {
            await this.options.handle(message);
          } catch (error) {
            this.options.onError(`could not apply entry ${message.seq} of ${this.options.stream}`, error);
          }
        }
      } catch (error) {
        if (!this.stopped) this.options.onError(`stopped following ${this.options.stream}; following again`, error);
        this.behindTo ??= 'last';
        failures++;
      }
      this.messages = undefined;
      if (this.stopped) return;
      await this.pause(Math.min(RESTART_MS * 2 ** Math.max(0, failures - 1), MAX_RESTART_MS));
      if (this.stopped) return;
    }
  }

  /** The pause before the next consumer, ended early by readSoon (or skipped when it came first). */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const end = (): void => {
        clearTimeout(timer);
        this.endPause = undefined;
        this.hurried = false;
        resolve();
      };
      const timer = setTimeout(end, ms);
      this.endPause = end;
      if (this.hurried) end();
    });
  }
}

/** The stream's first entry at or after `seq` on `filter` (every subject when not given; `>` also passes a sequence removed by age). */
const firstFrom = async (
  jsm: JetStreamManager,
  stream: string,
  seq: number,
  filter: string | undefined,
): Promise<FollowedMessage | null> => {
  const found = await firstMessageFrom(jsm, stream, seq, filter ?? '>');
  return found && { seq: found.seq, subject: found.subject, headers: found.header, json: <T>() => found.json<T>() };
};
