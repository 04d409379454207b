import type { JsonObject, StateValue } from '../domain/machine-state.js';
import { actorKey } from './actor-key.js';

/**
 * One committed transition of an instance, as its owner published it once the commit was durable.
 * It carries the full context: listeners re-check `allowRead` against it before anything leaves.
 */
export interface InstanceUpdate {
  kind: 'update';
  orgId: string;
  machine: string;
  name: string;
  versionId: string;
  /** The head's sequence number: strictly increasing per instance. */
  seq: number;
  /** When the state was committed (the same clock as HTTP responses); strictly increasing per instance. */
  ts: number;
  state: StateValue;
  context: JsonObject;
  tags: string[];
  done: boolean;
}

/** The instance was deleted: nothing more will come for it. */
export interface InstanceDeleted {
  kind: 'deleted';
  orgId: string;
  machine: string;
  name: string;
}

export type InstanceNews = InstanceUpdate | InstanceDeleted;

export type NewsListener = (news: InstanceNews) => void;

/**
 * Where owners publish what they committed, in commit order per instance, and where anything that
 * cares (realtime subscribers today; every node's catalog in a cluster) listens by instance. The
 * embedded node uses the in-process bus below; a cluster's carries the same news over NATS.
 */
export interface UpdateBus {
  publish(news: InstanceNews): void;
  /** Listens to one instance; returns what stops listening. */
  listen(orgId: string, machine: string, name: string, listener: NewsListener): () => void;
}

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
