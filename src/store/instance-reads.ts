import type { IndexPosition } from '../domain/index-values.js';
import type { IndexQuery, InstanceHead, InstanceStatus, TransitionRecord } from './instance-store.js';

/**
 * An instance's committed head as reads show it: what the API, realtime and http APIs read, without
 * what only its owner's runtime needs (the machine's snapshot, pending timers, outbox bookkeeping).
 */
export type InstanceView = Pick<
  InstanceHead,
  | 'orgId'
  | 'machine'
  | 'name'
  | 'createdAt'
  | 'versionId'
  | 'targetVersionId'
  | 'status'
  | 'seq'
  | 'ts'
  | 'state'
  | 'context'
  | 'tags'
  | 'done'
>;

export const viewOf = (head: InstanceHead): InstanceView => ({
  orgId: head.orgId,
  machine: head.machine,
  name: head.name,
  createdAt: head.createdAt,
  versionId: head.versionId,
  ...(head.targetVersionId === undefined ? {} : { targetVersionId: head.targetVersionId }),
  status: head.status,
  seq: head.seq,
  ts: head.ts,
  state: head.state,
  context: head.context,
  tags: head.tags,
  done: head.done,
});

/** An instance as a list shows it. */
export interface InstanceSummary {
  name: string;
  createdAt: string;
  status: InstanceStatus;
  versionId: string;
}

/**
 * What the API reads of instances, with read-your-writes: every write acknowledged before the read,
 * through any node, is in its answer. The embedded node reads its own store; a cluster node asks the
 * owners (each instance's for one instance, every partition's owner for lists and index queries,
 * merged in key order: cluster/forwarder.ts).
 */
export interface InstanceReads {
  /** The committed head, or undefined when the instance does not exist. */
  head(orgId: string, machine: string, name: string): Promise<InstanceView | undefined>;
  /** Instances of a machine in name order, after `afterName`. */
  listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): Promise<InstanceSummary[]>;
  listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): Promise<TransitionRecord[]>;
  /** A page of one index in index order (value, then instance name; reversed when descending). */
  queryIndex(query: IndexQuery): Promise<IndexPosition[]>;
  /** Whether the machine has any instance. */
  hasInstances(orgId: string, machine: string): Promise<boolean>;
}

export const summaryOf = (head: InstanceHead): InstanceSummary => ({
  name: head.name,
  createdAt: head.createdAt,
  status: head.status,
  versionId: head.versionId,
});
