import type { JsonObject, StateValue } from './machine-state.js';

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
