import type { IndexPosition } from '../../domain/index-values.js';
import { unavailable } from '../../domain/errors.js';
import { withinMs } from '../../domain/within-ms.js';
import type { IndexQuery, InstanceHead, InstanceStore } from '../instance-store.js';
import type { PartitionCopy } from './partition-copy.js';

/** The node's own LMDB store, which can list what it holds (a partition given up is dropped from it). */
export type LocalCopy = InstanceStore & { instanceKeys(): Iterable<[orgId: string, machine: string, name: string]> };

/**
 * What an owner answers of the partitions it holds for the others: its part of a list or an index
 * (the partitions it was asked about, once each is caught up), and what it holds.
 */
export class HeldPartitionReads {
  constructor(
    private readonly local: LocalCopy,
    private readonly partitions: {
      of(orgId: string, machine: string, name: string): number;
      /** The partition's copy, when this node holds it. */
      copy(partition: number): PartitionCopy | undefined;
      /** Mends what the copy may hold that the log never committed, before a part is answered from it (instance-audit.ts). */
      beforeAnswer?(partitions: ReadonlySet<number>): Promise<void>;
    },
  ) {}

  /**
   * The instances of the given partitions, in name order after `afterName`; 'moved' when one of them
   * is not held here or not caught up within READY_WAIT_MS (its asker asks its owner again).
   */
  async listPart(partitions: readonly number[], orgId: string, machine: string, afterName: string | undefined, limit: number) {
    const wanted = await this.readyPartitions(partitions);
    if (!wanted) return 'moved' as const;
    await this.mended(wanted);
    return this.listIn((partition) => wanted.has(partition), orgId, machine, afterName, limit);
  }

  /** The index entries of the given partitions, in the query's order; 'moved' as listPart. */
  async queryPart(partitions: readonly number[], query: IndexQuery) {
    const wanted = await this.readyPartitions(partitions);
    if (!wanted) return 'moved' as const;
    await this.mended(wanted);
    return this.queryIn((partition) => wanted.has(partition), query);
  }

  /** beforeAnswer, READY_WAIT_MS at most; a 503 when the log cannot be asked. */
  private async mended(partitions: ReadonlySet<number>): Promise<void> {
    try {
      await withinMs(
        this.partitions.beforeAnswer?.(partitions) ?? Promise.resolve(),
        READY_WAIT_MS,
        () => new Error(`no answer in ${READY_WAIT_MS} ms`),
      );
    } catch (error) {
      throw unavailable(
        `this node's copy holds instances whose last writes it cannot check against the cluster's log now (${error instanceof Error ? error.message : String(error)}); retry`,
      );
    }
  }

  /** The store's instances of the partitions `wanted` takes, in name order after `afterName` (pages read past the others). */
  listIn(
    wanted: (partition: number) => boolean,
    orgId: string,
    machine: string,
    afterName: string | undefined,
    limit: number,
  ): InstanceHead[] {
    const out: InstanceHead[] = [];
    let after = afterName;
    for (;;) {
      const page = this.local.listInstances(orgId, machine, after, limit);
      for (const head of page) if (wanted(this.partitions.of(orgId, machine, head.name)) && out.length < limit) out.push(head);
      if (out.length >= limit || page.length < limit) return out;
      after = page[page.length - 1]?.name;
    }
  }

  /** The store's index entries of the partitions `wanted` takes, in the query's order. */
  queryIn(wanted: (partition: number) => boolean, query: IndexQuery): IndexPosition[] {
    const out: IndexPosition[] = [];
    let after = query.after;
    for (;;) {
      const page = this.local.queryIndex({ ...query, ...(after ? { after } : {}) });
      for (const entry of page)
        if (wanted(this.partitions.of(query.orgId, query.machine, entry.name)) && out.length < query.limit) out.push(entry);
      if (out.length >= query.limit || page.length < query.limit) return out;
      after = page[page.length - 1];
    }
  }

  /**
   * The partitions as a set once each is held here and caught up, and past any entry that failed to
   * apply (its copy is behind the log by an unknown span meanwhile: a list or an index query would
   * answer from it stale); undefined when one is not held or not in time.
   */
  private async readyPartitions(partitions: readonly number[]): Promise<Set<number> | undefined> {
    const copies = partitions.map((partition) => this.partitions.copy(partition));
    if (copies.some((copy) => copy === undefined)) return undefined;
    const waiting = copies.filter((copy): copy is PartitionCopy => copy !== undefined && (!copy.ready || copy.behindTo !== undefined));
    if (waiting.length > 0) {
      const ready = await withinMs(
        Promise.all(
          waiting.map(async (copy) => {
            await copy.whenReady();
            const behindTo = copy.behindTo;
            if (behindTo !== undefined) await copy.appliedTo(behindTo, READY_WAIT_MS);
          }),
        ).then(() => waiting.every((copy) => copy.behindTo === undefined)),
        READY_WAIT_MS,
        () => undefined,
      ).catch(() => undefined);
      if (!ready) return undefined;
    }
    return new Set(partitions);
  }

  /**
   * The machine versions of the instances this node holds, distinct, at most `limit` (of the first
   * HEADS_LOOKED_AT instances): what a node loads into its sandbox before it takes its share.
   */
  heldVersions(
    limit: number,
    holds: (orgId: string, machine: string, name: string) => boolean,
  ): Array<{ orgId: string; machine: string; versionId: string }> {
    const found = new Map<string, { orgId: string; machine: string; versionId: string }>();
    let looked = 0;
    for (const [orgId, machine, name] of this.local.instanceKeys()) {
      if (found.size >= limit || looked++ >= HEADS_LOOKED_AT) break;
      if (!holds(orgId, machine, name)) continue;
      const versionId = this.local.getInstance(orgId, machine, name)?.versionId;
      if (versionId !== undefined) found.set(versionId, { orgId, machine, versionId });
    }
    return [...found.values()];
  }

  /** Every instance this store keeps. */
  storedInstances(): number {
    let count = 0;
    for (const _key of this.local.instanceKeys()) count++;
    return count;
  }

  /** The instances this store holds of the given partitions (the ones its node owns). */
  heldInstances(partitions: ReadonlySet<number>): number {
    let count = 0;
    for (const [orgId, machine, name] of this.local.instanceKeys()) if (partitions.has(this.partitions.of(orgId, machine, name))) count++;
    return count;
  }
}

/** Heads a joining node reads at most to find the versions to load before it takes its share (heldVersions). */
const HEADS_LOOKED_AT = 10_000;

/** How long a part of a list waits for its partitions to be caught up on a node that just took them. */
const READY_WAIT_MS = 10_000;
