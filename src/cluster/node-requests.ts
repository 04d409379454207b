import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** Why a node may be gone: NATS found no one listening on its subject, or a request to it waits long for its answer. */
export type Suspicion = 'no-responders' | 'slow';

/** How a request to another node ended. */
export type RequestEnd =
  | { answer: Uint8Array }
  /** No node listens on the subject (NATS said so): nothing ran there. */
  | { noResponders: true }
  /** The node took it and did not answer in time, or left the cluster meanwhile: it may have run. */
  | { lost: true };

interface Pending {
  node: string;
  sentAt: number;
  deadline: number;
  resolve: (end: RequestEnd) => void;
  reject: (error: unknown) => void;
}

/**
 * Request/reply to other nodes through one inbox subscription of this connection: each request is one
 * publish with a reply subject under the inbox, and one entry in a map until its reply comes, NATS
 * says no node listens (503), its node leaves the cluster (as `members` says) or its time is up. One
 * timer, running while requests are in flight, checks the last two for all of them every `checkMs`.
 * (NATS's own request() makes two Error objects per request, for their stacks, and a timer: several
 * times the cost of the rest of a forwarded request; see bench/probes/forward-hop.mjs.)
 */
export class NodeRequests {
  private readonly pending = new Map<string, Pending>();
  private subscription: Subscription | undefined;
  private prefix = '';
  private next = 0;
  private sweeping: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: {
      members: () => readonly string[];
      checkMs: number;
      /**
       * Told of a node that may be gone: NATS found no one listening on its subject, or a request to it has
       * waited longer than `slowMs` (it may have died with the request in hand). See Membership.suspect.
       */
      suspect?: (node: string, why: Suspicion) => void;
      slowMs?: number;
      /**
       * This node's id and the subject on which every node says its connection to NATS came back: the
       * requests in flight to a node that says so are lost too (see loseOnReconnect).
       */
      reconnects?: { nodeId: string; subject: string };
    },
  ) {
    const { reconnects } = options;
    if (reconnects) {
      nc.subscribe(reconnects.subject, {
        callback: (error, message) => {
          const node = error ? undefined : message.string();
          if (node && node !== reconnects.nodeId) this.end((pending) => pending.node === node);
        },
      });
    }
    void this.loseOnReconnect();
  }

  /**
   * The requests in flight when a connection to NATS came back, this node's or the asked node's, are
   * lost: the nats-server it was on may have died holding a request or its answer, and NATS sends
   * neither again. Waiting out their timeout (the settle limit and 10 s) held such requests ≈ 20 s after
   * a nats-server was killed; they are asked again instead, with their request ids, as after any answer
   * that did not come. (An answer sent before the reconnect, and so before the word of it, settles its
   * request first; one that overtakes it only costs a request asked again.)
   */
  private async loseOnReconnect(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type !== 'reconnect') continue;
      this.end(() => true);
      if (this.options.reconnects) this.nc.publish(this.options.reconnects.subject, this.options.reconnects.nodeId);
    }
  }

  request(node: string, subject: string, data: Uint8Array, timeoutMs: number): Promise<RequestEnd> {
    return new Promise<RequestEnd>((resolve, reject) => {
      try {
        this.subscribe();
        const token = (this.next++).toString(36);
        this.nc.publish(subject, data, { reply: this.prefix + token });
        const now = Date.now();
        this.pending.set(token, { node, sentAt: now, deadline: now + timeoutMs, resolve, reject });
        this.sweeping ??= setInterval(() => this.sweep(), this.options.checkMs);
      } catch (error) {
        reject(error);
      }
    });
  }

  private subscribe(): void {
    if (this.subscription) return;
    const inbox = createInbox();
    this.prefix = `${inbox}.`;
    const subscription = this.nc.subscribe(`${inbox}.*`, {
      callback: (error, message) => {
        if (!error) this.settle(message);
      },
    });
    this.subscription = subscription;
    void subscription.closed.then(() => {
      if (this.subscription === subscription) this.subscription = undefined;
      this.end(() => true, new Error('the NATS connection closed before the node answered'));
    });
  }

  private settle(message: Msg): void {
    const token = message.subject.slice(this.prefix.length);
    const pending = this.pending.get(token);
    if (!pending) return;
    this.pending.delete(token);
    if (message.data.length === 0 && message.headers?.code === 503) {
      this.options.suspect?.(pending.node, 'no-responders');
      pending.resolve(NO_RESPONDERS);
    } else pending.resolve({ answer: message.data });
  }

  private sweep(): void {
    const members = this.options.members();
    const now = Date.now();
    this.end((pending) => now > pending.deadline || !members.includes(pending.node));
    const { suspect, slowMs } = this.options;
    if (!suspect || slowMs === undefined) return;
    const slow = new Set<string>();
    for (const pending of this.pending.values()) if (now - pending.sentAt > slowMs) slow.add(pending.node);
    for (const node of slow) suspect(node, 'slow');
  }

  /** Ends the requests `which` picks: lost, or failed with `error`. */
  private end(which: (pending: Pending) => boolean, error?: Error): void {
    for (const [token, pending] of this.pending) {
      if (!which(pending)) continue;
      this.pending.delete(token);
      if (error) pending.reject(error);
      else pending.resolve(LOST);
    }
    if (this.pending.size === 0 && this.sweeping) {
      clearInterval(this.sweeping);
      this.sweeping = undefined;
    }
  }
}

const NO_RESPONDERS = { noResponders: true } as const;
const LOST = { lost: true } as const;
