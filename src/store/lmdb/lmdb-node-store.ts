import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import type { NodeStore } from '../catalog.js';
import { LmdbCatalog } from './lmdb-catalog.js';
import { LmdbInstanceStore } from './lmdb-instance-store.js';
import { LmdbLogStore } from './lmdb-log-store.js';
import { LmdbVersionStore } from './lmdb-version-store.js';

/**
 * The embedded deployment's storage: one LMDB environment under the data dir. lmdb-js batches the
 * writes issued in the same turn into one transaction and resolves each write's promise only after
 * that transaction is synced to disk, which is the group commit design.md §4 asks for.
 */
export const openLmdbNodeStore = (dataDir: string): NodeStore => {
  mkdirSync(dataDir, { recursive: true });
  const root = open({ path: join(dataDir, 'statehold.lmdb'), compression: false, maxDbs: 32 });
  const catalog = new LmdbCatalog(root);
  const versions = new LmdbVersionStore(root, catalog);
  return {
    catalog,
    versions,
    instances: new LmdbInstanceStore(root),
    logs: new LmdbLogStore(root),
    async close() {
      await root.flushed;
      await root.close();
    },
  };
};
