import type { InstanceNews, NewsListener, UpdateBus } from '../domain/instance-news.js';
import { actorKey } from './actor-key.js';

export type { InstanceDeleted, InstanceNews, InstanceUpdate, NewsListener, UpdateBus } from '../domain/instance-news.js';

/**
 * The embedded node's bus: listeners are called synchronously, in publish order, so commit order is
 * kept without sequencing. An instance nobody listens to costs one map lookup per commit.
 */
export class InProcessUpdateBus implements UpdateBus {
  private readonly listeners = new Map<string, Set<NewsListener>>();

  publish(news: InstanceNews): void {
    const listeners = this.listeners.get(actorKey(news.orgId, news.machine, news.name));
    if (!listeners) return;
    // (a copy: a listener may stop listening while it is told)
    for (const listener of [...listeners]) listener(news);
  }

  listen(orgId: string, machine: string, name: string, listener: NewsListener): () => void {
    const key = actorKey(orgId, machine, name);
    let listeners = this.listeners.get(key);
    if (!listeners) {
      listeners = new Set();
      this.listeners.set(key, listeners);
    }
    listeners.add(listener);
    return () => {
      const current = this.listeners.get(key);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.listeners.delete(key);
    };
  }

  /** How many instances are listened to (for tests and stats). */
  get listenedInstances(): number {
    return this.listeners.size;
  }
}
