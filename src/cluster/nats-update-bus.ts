import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { InstanceNews, NewsListener, UpdateBus } from '../domain/instance-news.js';

/** What crosses NATS: the news and the node that published it (which ignores its own echo). */
interface Envelope {
  from: string;
  news: InstanceNews;
}

/**
 * The update bus of a cluster: an owner's commits reach listeners on its own node synchronously (as
 * in the embedded node) and every other node through one core NATS subject per instance. NATS keeps
 * the order of one publisher's messages on a subject, and an instance has one owner at a time, so
 * listeners get its news in commit order. A node subscribes to an instance's subject only while one
 * of its listeners listens to it.
 */
export class NatsUpdateBus implements UpdateBus {
  private readonly listeners = new Map<string, { local: Set<NewsListener>; subscription: Subscription }>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: { cluster: string; nodeId: string; onError: (message: string, error: unknown) => void },
  ) {}

  publish(news: InstanceNews): void {
    const subject = this.subjectOf(news.orgId, news.machine, news.name);
    this.deliver(subject, news);
    try {
      this.nc.publish(subject, JSON.stringify({ from: this.options.nodeId, news } satisfies Envelope));
    } catch (error) {
      // (the connection is closed: the node is stopping, and other nodes' subscribers reconnect elsewhere)
      this.options.onError('could not publish an instance update on NATS', error);
    }
  }

  listen(orgId: string, machine: string, name: string, listener: NewsListener): () => void {
    const subject = this.subjectOf(orgId, machine, name);
    let entry = this.listeners.get(subject);
    if (!entry) {
      const subscription = this.nc.subscribe(subject, {
        callback: (error, message) => {
          if (error) return;
          let envelope: Envelope;
          try {
            envelope = message.json<Envelope>();
          } catch (parseError) {
            this.options.onError('an instance update on NATS was not JSON', parseError);
            return;
          }
          if (envelope.from !== this.options.nodeId) this.deliver(subject, envelope.news);
        },
      });
      entry = { local: new Set(), subscription };
      this.listeners.set(subject, entry);
    }
    entry.local.add(listener);
    return () => {
      const current = this.listeners.get(subject);
      if (!current) return;
      current.local.delete(listener);
      if (current.local.size === 0) {
        current.subscription.unsubscribe();
        this.listeners.delete(subject);
      }
    };
  }

  private deliver(subject: string, news: InstanceNews): void {
    const entry = this.listeners.get(subject);
    if (!entry) return;
    for (const listener of [...entry.local]) listener(news);
  }

  /** Names are `[a-zA-Z0-9_-]` (ids too), so each is one NATS token. */
  private subjectOf(orgId: string, machine: string, name: string): string {
    return `statehold.${this.options.cluster}.updates.${orgId}.${machine}.${name}`;
  }
}
