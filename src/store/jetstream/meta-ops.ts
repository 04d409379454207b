import type { ObjectStore } from '@nats-io/obj';
import type { Catalog } from '../catalog.js';
import type { VersionStore } from '../version-store.js';
import type { ApplyOp } from './op-log.js';
import { type CatalogOp, applyCatalogOp } from './replicated-catalog.js';
import { type CodeReadError, type VersionOp, applyVersionOp } from './replicated-versions.js';

/** Everything the cluster's META log carries: each operation names the store it writes by `store`. */
export type MetaOp = CatalogOp | VersionOp;

/** Applies a META operation to this node's local stores (every node, in log order). */
export const applyMetaOp = (catalog: Catalog, versions: VersionStore, code: ObjectStore, onError?: CodeReadError): ApplyOp<MetaOp> => {
  const applyCatalog = applyCatalogOp(catalog);
  const applyVersions = applyVersionOp(versions, code, onError);
  return (op, seq) => {
    switch (op.store) {
      case 'catalog':
        return applyCatalog(op, seq);
      case 'versions':
        return applyVersions(op, seq);
    }
  };
};
