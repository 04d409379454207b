import type { RootDatabase } from 'lmdb';

/**
 * How the LMDB stores of one node (catalog, versions, machine logs) make their writes: refused with 503
 * while the node's storage refuses writes (the instance store's `writeRefusal`: LMDB failed a commit,
 * or the data dir's files went away), and a commit LMDB fails (a full disk) makes the whole storage
 * refuse writes from then on, as the instance store does: commit after failing commit is what ended
 * in a corrupted heap in lmdb-js. The caller gets 503 `storage failed …: restart the node`, not a 500.
 */
export interface StorageWrites {
  /** `work` in one LMDB transaction (lmdb-js's asynchronous `transaction`). */
  transaction<T>(work: () => T): Promise<T>;
  /** A write made outside a transaction (`db.put`), awaited the same way. */
  write<T>(write: () => Promise<T>): Promise<T>;
}

export const storageWrites = (root: RootDatabase, refusal: () => Error | undefined, refuse: (why: Error) => void): StorageWrites => {
  const guarded = <T>(write: () => Promise<T>): Promise<T> => {
    const refused = refusal();
    if (refused) return Promise.reject(refused);
    return write().catch((error: unknown) => {
      if (!isLmdbCommitFailure(error)) throw error;
      refuse(error);
      // (the refusal every later write gets: `storage failed (…): restart the node`)
      throw refusal() ?? error;
    });
  };
  return { transaction: (work) => guarded(() => root.transaction(work)), write: guarded };
};

/** lmdb-js's error for the writes of a commit LMDB failed (write.js rejectCommit): that message, and `commitError`. */
export const isLmdbCommitFailure = (error: unknown): error is Error & { commitError: Promise<unknown> } =>
  error instanceof Error && 'commitError' in error && error.message.startsWith('Commit failed');

/** LMDB's own error for a failed commit, which lmdb-js rejects `commitError` with: a numeric `code`, raised in its write.js. */
export const isLmdbWriteError = (error: unknown): boolean =>
  error instanceof Error &&
  typeof (error as { code?: unknown }).code === 'number' &&
  /[\\/]node_modules[\\/]lmdb[\\/]write\.js/.test(error.stack ?? '');
