import { InstanceNotFoundError, notFound, rejectedByAuthorizer } from '../../domain/errors.js';
import type { JsonObject } from '../../domain/machine-state.js';
import type { InstanceNews, InstanceUpdate } from '../../runtime/update-bus.js';
import { errorText, updateText } from './rt-messages.js';

/** A websocket as the realtime hub sees it (the uWS binding implements it; tests may too). */
export interface RtPeer {
  readonly id: number;
  readonly open: boolean;
  /** Its client leaves much of what it was sent unread: the answers to its own frames are not sent then. */
  readonly backlogged?: boolean;
  send(text: string): void;
  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
}

/** One serialization reaches every socket subscribed to a topic (uWS's own publish). */
export interface RtFanout {
  publish(topic: string, text: string): void;
}

/** What a channel needs of the runtime: the authorizer, and the read meter. */
export interface ChannelRuntime {
  /** allowRead of one state for several auth contexts: a verdict for each. */
  allowsRead(view: Omit<InstanceUpdate, 'kind' | 'seq' | 'ts' | 'tags' | 'done'>, authContexts: JsonObject[]): Promise<boolean[]>;
  countRead(orgId: string, machine: string): void;
}

/** One `subscribe-to-instance` of one socket, from its arrival until unsubscribed, refused or closed. */
export interface Subscription {
  readonly requestId: string;
  readonly peer: RtPeer;
  readonly authContext: JsonObject;
  /** Stable text of the auth context: subscribers with equal ones share an authorizer check and a topic. */
  readonly authKey: string;
  active: boolean;
  group?: AuthGroup;
  /** Called when the channel stops it on its own (refused, or the instance was deleted). */
  onRefused?: () => void;
}

/** The subscribers of an instance that share one auth context: one allowRead per update, one topic. */
interface AuthGroup {
  readonly topic: string;
  readonly authContext: JsonObject;
  /** Subscriptions by socket: a socket is on the topic while it has one here. */
  readonly members: Map<number, Set<Subscription>>;
}

type Work = { kind: 'news'; news: InstanceNews } | { kind: 'subscribe'; subscription: Subscription };

/** Auth contexts checked per call into the sandbox. */
const AUTHORIZE_BATCH = 100;

/** News waiting beyond this many are dropped oldest first (subscribers are promised the latest state, not every one). */
export const MAX_QUEUED_NEWS = 256;

/**
 * The realtime side of one instance: its subscribers, grouped by auth context, and the news of its
 * commits, taken strictly in order. Each update is checked with allowRead once per group, serialized
 * once, and published to each group's topic; a group whose check now fails gets an error on each of
 * its subscriptions, which stop. A subscribe waits its turn in the same queue, so the state it is
 * sent first is exactly the one the topic has reached, and no update comes twice or out of order.
 */
export class InstanceChannel {
  private readonly groups = new Map<string, AuthGroup>();
  private readonly queue: Work[] = [];
  private queuedNews = 0;
  private pumping = false;
  private subscriptions = 0;
  private deleted = false;
  private topics = 0;

  constructor(
    readonly key: string,
    /** The state the channel starts from (read when its first subscriber came). */
    private latest: InstanceUpdate,
    private readonly runtime: ChannelRuntime,
    private readonly fanout: RtFanout,
    /** Told when nothing is left to do and nobody is subscribed (the hub stops listening then). */
    private readonly onEmpty: (channel: InstanceChannel) => void,
    private readonly onError: (message: string, error: unknown) => void,
  ) {}

  /** Subscriptions to this instance, on every socket (for metrics). */
  get subscriberCount(): number {
    return this.subscriptions;
  }

  /** Whether anyone is subscribed or waiting. */
  get idle(): boolean {
    return this.subscriptions === 0 && this.queue.length === 0 && !this.pumping;
  }

  news(news: InstanceNews): void {
    if (news.kind === 'update' && this.queuedNews >= MAX_QUEUED_NEWS) {
      const oldest = this.queue.findIndex((work) => work.kind === 'news' && work.news.kind === 'update');
      if (oldest >= 0) {
        this.queue.splice(oldest, 1);
        this.queuedNews--;
      }
    }
    if (news.kind === 'update') this.queuedNews++;
    this.queue.push({ kind: 'news', news });
    this.pump();
  }

  subscribe(subscription: Subscription): void {
    this.subscriptions++;
    this.queue.push({ kind: 'subscribe', subscription });
    this.pump();
  }

  /** Stops one subscription (unsubscribed, or its socket closed); idempotent. */
  unsubscribe(subscription: Subscription): void {
    if (!subscription.active) return;
    subscription.active = false;
    this.subscriptions--;
    const group = subscription.group;
    if (group) {
      const mine = group.members.get(subscription.peer.id);
      mine?.delete(subscription);
      if (mine && mine.size === 0) {
        group.members.delete(subscription.peer.id);
        if (subscription.peer.open) subscription.peer.unsubscribe(group.topic);
      }
      if (group.members.size === 0) this.groups.delete(subscription.authKey);
    }
    if (this.idle) this.onEmpty(this);
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    void this.drainQueue();
  }

  private async drainQueue(): Promise<void> {
    try {
      for (let work = this.queue.shift(); work; work = this.queue.shift()) {
        try {
          if (work.kind === 'subscribe') await this.admit(work.subscription);
          else {
            if (work.news.kind === 'update') this.queuedNews--;
            await this.apply(work.news);
          }
        } catch (error) {
          this.onError('a realtime channel could not handle its work', error);
        }
      }
    } finally {
      this.pumping = false;
      if (this.idle) this.onEmpty(this);
    }
  }

  private async admit(subscription: Subscription): Promise<void> {
    if (!subscription.active) return;
    const latest = this.latest;
    if (this.deleted) return this.refuse(subscription, new InstanceNotFoundError(latest.machine, latest.name));
    let allowed: boolean;
    try {
      allowed = (await this.runtime.allowsRead(latest, [subscription.authContext]))[0] === true;
    } catch (error) {
      return this.refuse(subscription, error);
    }
    if (!subscription.active) return;
    if (!allowed) return this.refuse(subscription, rejectedByAuthorizer('allowRead'));
    let group = this.groups.get(subscription.authKey);
    if (!group) {
      group = { topic: `${this.key}\u0000${this.topics++}`, authContext: subscription.authContext, members: new Map() };
      this.groups.set(subscription.authKey, group);
    }
    subscription.group = group;
    let mine = group.members.get(subscription.peer.id);
    if (!mine) {
      mine = new Set();
      group.members.set(subscription.peer.id, mine);
      subscription.peer.subscribe(group.topic);
    }
    mine.add(subscription);
    // (the same tick as joining the topic: nothing is published in between)
    subscription.peer.send(updateText(latest));
    this.runtime.countRead(latest.orgId, latest.machine);
  }

  private async apply(news: InstanceNews): Promise<void> {
    if (news.kind === 'deleted') {
      this.deleted = true;
      const gone = notFound(`instance ${news.name} of machine ${news.machine} was deleted`);
      for (const group of [...this.groups.values()]) this.refuseGroup(group, gone);
      return;
    }
    if (news.seq <= this.latest.seq) return;
    this.latest = news;
    const groups = [...this.groups.values()];
    if (groups.length === 0) return;
    const verdicts = await this.verdicts(news, groups);
    const text = updateText(news);
    groups.forEach((group, i) => {
      if (group.members.size === 0) return;
      const verdict = verdicts[i];
      if (verdict === true) this.fanout.publish(group.topic, text);
      else this.refuseGroup(group, verdict);
    });
  }

  /**
   * allowRead for every group, AUTHORIZE_BATCH auth contexts per call into the sandbox (so a thousand
   * distinct subscribers cost ten calls, each well inside the sandbox's stall limit): true, or the
   * error that ends the group's subscriptions.
   */
  private async verdicts(news: InstanceUpdate, groups: AuthGroup[]): Promise<unknown[]> {
    const batches: AuthGroup[][] = [];
    for (let i = 0; i < groups.length; i += AUTHORIZE_BATCH) batches.push(groups.slice(i, i + AUTHORIZE_BATCH));
    const answers = await Promise.all(
      batches.map((batch) =>
        this.runtime
          .allowsRead(
            news,
            batch.map((group) => group.authContext),
          )
          .then(
            (allowed) => batch.map((_, i) => allowed[i] === true || rejectedByAuthorizer('allowRead')),
            (error: unknown) => batch.map(() => error),
          ),
      ),
    );
    return answers.flat();
  }

  private refuseGroup(group: AuthGroup, error: unknown): void {
    for (const subscriptions of [...group.members.values()])
      for (const subscription of [...subscriptions]) this.refuse(subscription, error);
  }

  private refuse(subscription: Subscription, error: unknown): void {
    if (!subscription.active) return;
    if (subscription.peer.open) subscription.peer.send(errorText(subscription.requestId, error));
    this.unsubscribe(subscription);
    subscription.onRefused?.();
  }
}
