import { invalidParameter, InstanceNotFoundError, rateLimited, type ServiceError, unauthorized, unavailable } from '../../domain/errors.js';
import type { InstanceNews } from '../../domain/instance-news.js';
import type { JsonObject } from '../../domain/machine-state.js';
import { actorKey } from '../../runtime/actor-key.js';
import { type UpdateBus, updateOf } from '../../runtime/update-bus.js';
import type { InstanceView } from '../../store/instance-reads.js';
import { type ChannelRuntime, InstanceChannel, type RtFanout, type RtPeer, type Subscription } from './instance-channel.js';
import { BadFrame, type ClientMessage, errorText, parseClientMessage } from './rt-messages.js';

/** The documented bounds of one realtime connection (docs/realtime.md). */
export interface RealtimeLimits {
  /** Subscriptions open at once on one socket, duplicates included. */
  maxSubscriptionsPerSocket: number;
  /** Subscribes a socket may make per second, with `subscribeBurst` saved up. */
  subscribesPerSecond: number;
  subscribeBurst: number;
  /** Subscriptions open at once on all of the node's sockets together, those being made included. */
  maxSubscriptions: number;
  /** Sockets open at once (rt-websocket.ts). */
  maxSockets: number;
  /** How long a socket may stay open holding no subscription (rt-websocket.ts). */
  unsubscribedCloseMs: number;
}

export const defaultRealtimeLimits: RealtimeLimits = {
  maxSubscriptionsPerSocket: 1_000,
  subscribesPerSecond: 100,
  subscribeBurst: 1_000,
  maxSubscriptions: 100_000,
  maxSockets: 10_000,
  unsubscribedCloseMs: 60_000,
};

/**
 * Who a socket's token says its owner is, checked again at each subscribe (so an expired token is
 * noticed), and the key that signed it (none for the operator key).
 */
type RtAuthenticate = (token: string, orgHeader: string | undefined) => { orgId: string; authContext: JsonObject; keyId?: string };

interface RealtimeHubDeps {
  runtime: ChannelRuntime;
  bus: UpdateBus;
  fanout: RtFanout;
  authenticate: RtAuthenticate;
  /** Whether a signing key still exists (a deleted key's subscriptions end: dropRevoked). */
  keyExists: (keyId: string) => boolean;
  /**
   * The instance's committed head with every commit acknowledged so far, through any node, in (as HTTP
   * reads have it): the first state a subscriber gets is then never older than an answer it already had.
   */
  head: (orgId: string, machine: string, name: string) => Promise<InstanceView | undefined>;
  limits: RealtimeLimits;
  logError: (message: string, error: unknown) => void;
}

/** One connected socket: its credential (as given when it connected) and its subscriptions by requestId. */
export interface RtSession {
  readonly peer: RtPeer;
  readonly token: string;
  readonly orgHeader: string | undefined;
  /** What is wrong with the credentials the socket was opened with (a repeated one): each subscribe is refused with it. */
  readonly credentialProblem?: ServiceError | undefined;
  readonly subscriptions: Map<string, { subscription: Subscription; channel: InstanceChannel }>;
  subscribeTokens: number;
  tokensAt: number;
  /** The key that signed the token, once a subscribe verified it. */
  keyId?: string;
  /** Subscribes waiting for the local copy to catch up, by requestId; `cancelled` once unsubscribed meanwhile. */
  readonly waiting: Map<string, { cancelled: boolean }>;
  closed: boolean;
}

export const newSession = (
  peer: RtPeer,
  token: string,
  orgHeader: string | undefined,
  limits: RealtimeLimits,
  credentialProblem?: ServiceError,
): RtSession => ({
  peer,
  token,
  orgHeader,
  credentialProblem,
  subscriptions: new Map(),
  subscribeTokens: limits.subscribeBurst,
  tokensAt: Date.now(),
  waiting: new Map(),
  closed: false,
});

/**
 * The `/rt` protocol (wire-protocol §6), apart from the socket library: sessions, subscribe and
 * unsubscribe, and one InstanceChannel per instance anyone subscribes to, listening on the update bus.
 * Every problem is answered in-band as an `error` frame and the socket stays open: the real client
 * reconnects at once, with no backoff and the same token, whenever a socket closes.
 */
export class RealtimeHub {
  private readonly channels = new Map<string, { channel: InstanceChannel; stopListening: () => void }>();
  /** Sockets signed in with a key that subscribed at least once (dropRevoked looks at them). */
  private readonly keyed = new Set<RtSession>();
  /** Subscriptions held and being made on every socket (the node-wide bound, maxSubscriptions). */
  private held = 0;

  constructor(private readonly deps: RealtimeHubDeps) {}

  /** Instances with at least one subscriber or update in hand (for stats and tests). */
  get channelCount(): number {
    return this.channels.size;
  }

  /** Subscriptions open on every socket, counted at a scrape (GET /metrics). */
  get subscriptionCount(): number {
    let count = 0;
    for (const { channel } of this.channels.values()) count += channel.subscriberCount;
    return count;
  }

  /**
   * A frame on a socket the node holds beyond its bound (rt-websocket.ts): a subscribe is answered
   * with `error` (503), anything else is ignored.
   */
  refuse(session: RtSession, text: string, error: unknown): void {
    let message: ClientMessage;
    try {
      message = parseClientMessage(text);
    } catch (problem) {
      if (!(problem instanceof BadFrame)) throw problem;
      return;
    }
    if (message.type === 'subscribe-to-instance') answer(session, errorText(message.requestId, error));
  }

  /** One text frame from a socket. */
  handle(session: RtSession, text: string): void {
    let message: ClientMessage;
    try {
      message = parseClientMessage(text);
    } catch (error) {
      if (!(error instanceof BadFrame)) throw error;
      answer(session, errorText(error.requestId, error.error));
      return;
    }
    if (message.type === 'ping') return;
    if (message.type === 'unsubscribe-from-instance') return this.unsubscribe(session, message.requestId);
    const { machineName, machineInstanceName, requestId } = message;
    const refuse = (error: unknown) => answer(session, errorText(requestId, error));
    try {
      this.subscribe(session, machineName, machineInstanceName, requestId).catch(refuse);
    } catch (error) {
      refuse(error);
    }
  }

  /** The socket closed: every subscription on it stops. */
  closed(session: RtSession): void {
    session.closed = true;
    for (const { subscription, channel } of session.subscriptions.values()) channel.unsubscribe(subscription);
    this.held -= session.subscriptions.size;
    session.subscriptions.clear();
    this.keyed.delete(session);
  }

  /**
   * Ends every subscription whose socket's token was signed by a key that no longer exists (deleted,
   * or an org's anonymous access turned off), each with an in-band `403 unauthorized`; the socket stays
   * open, as for any credential problem. An expired token is not ended here: the real client keeps the
   * token it first connected with for the socket's whole life, so its subscriptions go on (docs/realtime.md).
   * Called when this node deletes a key, and every second for keys deleted through other nodes.
   */
  dropRevoked(): number {
    const exists = new Map<string, boolean>();
    let ended = 0;
    for (const session of this.keyed) {
      if (session.subscriptions.size === 0) {
        this.keyed.delete(session);
        continue;
      }
      const keyId = session.keyId as string;
      let live = exists.get(keyId);
      if (live === undefined) exists.set(keyId, (live = this.deps.keyExists(keyId)));
      if (live) continue;
      const revoked = unauthorized("the key that signed this connection's token was deleted");
      for (const [requestId, { subscription, channel }] of session.subscriptions) {
        if (session.peer.open) session.peer.send(errorText(requestId, revoked));
        channel.unsubscribe(subscription);
        ended++;
      }
      this.held -= session.subscriptions.size;
      session.subscriptions.clear();
      this.keyed.delete(session);
    }
    return ended;
  }

  /**
   * Checks what it can at once (throwing), then waits for the local copy (rejecting with what fails
   * after): what the hub must do in order per socket happens before the wait or after it in one tick.
   */
  private subscribe(session: RtSession, machine: string, name: string, requestId: string): Promise<void> {
    const { limits } = this.deps;
    if (session.subscriptions.has(requestId) || session.waiting.has(requestId)) {
      throw invalidParameter('requestId', `requestId ${requestId} is already used by a subscription on this connection`);
    }
    if (session.subscriptions.size + session.waiting.size >= limits.maxSubscriptionsPerSocket) {
      throw rateLimited(
        `a connection may hold at most ${limits.maxSubscriptionsPerSocket} subscriptions; unsubscribe some or open another connection`,
      );
    }
    if (!takeSubscribeToken(session, limits)) {
      throw rateLimited(
        `a connection may subscribe at most ${limits.subscribesPerSecond} times a second (${limits.subscribeBurst} at once)`,
      );
    }
    if (session.credentialProblem) throw session.credentialProblem;
    const { orgId, authContext, keyId } = this.deps.authenticate(session.token, session.orgHeader);
    if (this.held >= limits.maxSubscriptions) {
      throw unavailable(`this node holds as many realtime subscriptions as it may (${limits.maxSubscriptions}): try again later`);
    }
    const waiting = { cancelled: false };
    session.waiting.set(requestId, waiting);
    // News that comes while the head is read (from the owner, maybe on another node) is kept, so that
    // a channel made from that head misses no commit after it.
    const early: InstanceNews[] = [];
    const stopEarly = this.channels.has(actorKey(orgId, machine, name))
      ? () => undefined
      : this.deps.bus.listen(orgId, machine, name, (news) => early.push(news));
    // Counted from here; a subscribe that does not end admitted gives its place back.
    this.held++;
    let admitted = false;
    return this.deps
      .head(orgId, machine, name)
      .finally(() => {
        if (session.waiting.get(requestId) === waiting) session.waiting.delete(requestId);
      })
      .then((head) => {
        if (waiting.cancelled || session.closed) return;
        // (checked again: the key may have been deleted while this subscribe waited)
        if (keyId !== undefined && !this.deps.keyExists(keyId))
          throw unauthorized("the key that signed this connection's token was deleted");
        this.admit(session, orgId, authContext, keyId, { machine, name, head, early }, requestId);
        admitted = true;
      })
      .finally(() => {
        stopEarly();
        if (!admitted) this.held--;
      });
  }

  private admit(
    session: RtSession,
    orgId: string,
    authContext: JsonObject,
    keyId: string | undefined,
    instance: { machine: string; name: string; head: InstanceView | undefined; early: InstanceNews[] },
    requestId: string,
  ): void {
    const channel = this.channelFor(orgId, instance);
    if (keyId !== undefined) {
      session.keyId = keyId;
      this.keyed.add(session);
    }
    const subscription: Subscription = {
      requestId,
      peer: session.peer,
      authContext,
      authKey: JSON.stringify(authContext),
      active: true,
      onRefused: () => {
        if (session.subscriptions.get(requestId)?.subscription !== subscription) return;
        session.subscriptions.delete(requestId);
        this.held--;
      },
    };
    session.subscriptions.set(requestId, { subscription, channel });
    channel.subscribe(subscription);
  }

  private unsubscribe(session: RtSession, requestId: string): void {
    const waiting = session.waiting.get(requestId);
    if (waiting) {
      waiting.cancelled = true;
      session.waiting.delete(requestId);
      return;
    }
    const entry = session.subscriptions.get(requestId);
    if (!entry) return;
    session.subscriptions.delete(requestId);
    this.held--;
    entry.channel.unsubscribe(entry.subscription);
  }

  private channelFor(
    orgId: string,
    { machine, name, head, early }: { machine: string; name: string; head: InstanceView | undefined; early: InstanceNews[] },
  ): InstanceChannel {
    const key = actorKey(orgId, machine, name);
    const existing = this.channels.get(key);
    if (existing) return existing.channel;
    if (!head) throw new InstanceNotFoundError(machine, name);
    const channel = new InstanceChannel(
      key,
      updateOf(head),
      this.deps.runtime,
      this.deps.fanout,
      (empty) => this.forget(empty),
      this.deps.logError,
    );
    // The listening begins in the same tick as the news kept while the head was read is handed on
    // (the channel passes by what its head has already): no commit falls between them.
    const stopListening = this.deps.bus.listen(orgId, machine, name, (news) => channel.news(news));
    for (const news of early) channel.news(news);
    this.channels.set(key, { channel, stopListening });
    return channel;
  }

  private forget(channel: InstanceChannel): void {
    const entry = this.channels.get(channel.key);
    if (entry?.channel !== channel) return;
    entry.stopListening();
    this.channels.delete(channel.key);
  }
}

/**
 * An error answering one of the socket's own frames. Not sent while the socket leaves much of its
 * output unread: a client sending bad frames without reading would otherwise make the node hold an
 * error for each (up to the socket's hard bound, 4 MiB); the slow-consumer sweep closes it soon.
 */
export const answer = (session: RtSession, text: string): void => {
  if (session.peer.open && session.peer.backlogged !== true) session.peer.send(text);
};

const takeSubscribeToken = (session: RtSession, limits: RealtimeLimits): boolean => {
  const now = Date.now();
  session.subscribeTokens = Math.min(
    limits.subscribeBurst,
    session.subscribeTokens + ((now - session.tokensAt) / 1000) * limits.subscribesPerSecond,
  );
  session.tokensAt = now;
  if (session.subscribeTokens < 1) return false;
  session.subscribeTokens -= 1;
  return true;
};
