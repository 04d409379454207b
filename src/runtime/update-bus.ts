import type { InstanceNews, InstanceUpdate, NewsListener, UpdateBus } from '../domain/instance-news.js';
import type { InstanceHead } from '../store/instance-store.js';
import { actorKey } from './actor-key.js';

export type { InstanceNews, InstanceUpdate, UpdateBus } from '../domain/instance-news.js';

/** What the bus carries of a committed head (the owner's publish, and a realtime channel's starting state). */
export const updateOf = (
  head: Pick<InstanceHead, 'orgId' | 'machine' | 'name' | 'versionId' | 'seq' | 'ts' | 'state' | 'context' | 'tags' | 'done'>,
): InstanceUpdate => ({
  kind: 'update',
  orgId: head.orgId,
  machine: head.machine,
  name: head.name,
  versionId: head.versionId,
  seq: head.seq,
  ts: head.ts,
  state: head.state,
  context: head.context,
  tags: head.tags,
  done: head.done,
});

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
