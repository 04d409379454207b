import type { ObjectStore } from '@nats-io/obj';
import type { Catalog } from '../catalog.js';
import type { InstanceStore, UsageDelta } from '../instance-store.js';
import type { VersionStore } from '../version-store.js';
import type { ApplyOp } from './op-log.js';
import { type CatalogOp, applyCatalogOp } from './replicated-catalog.js';
import { type CodeReadError, type VersionOp, applyVersionOp } from './replicated-versions.js';

/** A node's usage counts of about a second (UsageMeter), shared so that every node's copy sums every node's. */
export interface UsageOp {
  store: 'usage';
  method: 'addUsage';
  /**
   * orgId, counts, machine (null: the org only), when they were counted (their month), and the counting
   * run with its totals so far (shared-usage.ts; absent from the batches of releases before 2026-11-29,
   * whose counts are added as they are).
   */
  args: [string, UsageDelta, string | null, number, string?, UsageDelta?];
}

/** Everything the cluster's META log carries: each operation names the store it writes by `store`. */
export type MetaOp = CatalogOp | VersionOp | UsageOp;

/** Applies a META operation to this node's local stores (every node, in log order). */
export const applyMetaOp = (
  catalog: Catalog,
  versions: VersionStore,
  code: ObjectStore,
  instances: Pick<InstanceStore, 'addUsage'>,
  onError?: CodeReadError,
): ApplyOp<MetaOp> => {
  const applyCatalog = applyCatalogOp(catalog);
  const applyVersions = applyVersionOp(versions, code, onError);
  return (op, seq) => {
    switch (op.store) {
      case 'catalog':
        return applyCatalog(op, seq);
      case 'versions':
        return applyVersions(op, seq);
      case 'usage': {
        // (at its stream sequence: counts replayed after a crash, from the last checkpoint, are not added twice)
        const [orgId, usage, machine, atMs, run, totals] = op.args;
        const counted = typeof run === 'string' && isUsageDelta(totals) ? { run, totals } : undefined;
        return instances.addUsage(orgId, usage, machine ?? undefined, atMs, seq, counted);
      }
    }
  };
};

const isUsageDelta = (value: unknown): value is UsageDelta =>
  typeof value === 'object' &&
  value !== null &&
  Number.isSafeInteger((value as UsageDelta).transitions) &&
  Number.isSafeInteger((value as UsageDelta).reads);
