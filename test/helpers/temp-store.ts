import { openLmdbNodeStore } from '../../src/store/lmdb/lmdb-node-store.js';
import { removeDir, tempDataDir } from './node-process.js';

/** A node's LMDB stores in a temp directory, closed and removed when the test ends. */
export const tempNodeStore = (t: { teardown(fn: () => unknown): void }) => {
  const dir = tempDataDir();
  const store = openLmdbNodeStore(dir);
  t.teardown(async () => {
    await store.close();
    removeDir(dir);
  });
  return store;
};
