import type { IndexPosition } from '../domain/index-values.js';
import { type InstanceReads, type InstanceSummary, type InstanceView, summaryOf } from '../store/instance-reads.js';
import type { IndexQuery, InstanceHead, InstanceStore, TransitionRecord } from '../store/instance-store.js';

/**
 * The embedded node's reads: its store is the truth and its runtime the only owner, so every read is
 * answered here (a held actor's head first: it is what was committed last).
 */
export class LocalInstanceReads implements InstanceReads {
  constructor(
    private readonly store: InstanceStore,
    private readonly runtime: { head(orgId: string, machine: string, name: string): InstanceHead | undefined },
    private readonly hasAny: (orgId: string, machine: string) => boolean,
  ) {}

  async head(orgId: string, machine: string, name: string): Promise<InstanceView | undefined> {
    await this.store.caughtUp(orgId, machine, name);
    return this.runtime.head(orgId, machine, name);
  }

  async listInstances(orgId: string, machine: string, afterName: string | undefined, limit: number): Promise<InstanceSummary[]> {
    await this.store.caughtUp(orgId);
    return this.store.listInstances(orgId, machine, afterName, limit).map(summaryOf);
  }

  async listTransitions(orgId: string, machine: string, name: string, afterSeq: number, limit: number): Promise<TransitionRecord[]> {
    await this.store.caughtUp(orgId, machine, name);
    return this.store.listTransitions(orgId, machine, name, afterSeq, limit);
  }

  async queryIndex(query: IndexQuery): Promise<IndexPosition[]> {
    await this.store.caughtUp(query.orgId);
    return this.store.queryIndex(query);
  }

  async hasInstances(orgId: string, machine: string): Promise<boolean> {
    await this.store.caughtUp(orgId);
    return this.hasAny(orgId, machine);
  }
}
