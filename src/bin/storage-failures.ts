import type { Logger } from '../domain/logger.js';
import { isLmdbCommitFailure, isLmdbWriteError } from '../store/lmdb/storage-writes.js';

/**
 * lmdb-js rejects the promise of every write of a commit LMDB failed (a full disk: ENOSPC), also of
 * the writes the stores queue without waiting for (index entries, due timers, the log's applied
 * position, a catalog's derived rows): each store learns of the failure from a write it does wait
 * for, and refuses writes from then on (503, behaviour.md "Durability"). Node ends the process on an
 * unhandled rejection, so one of those took the node down instead. They are logged here, one line a
 * second at most; any other unhandled rejection still ends the process.
 */
export const keepUpOnStorageFailures = (logger: Logger): void => {
  let lastLoggedAt = 0;
  let unlogged = 0;
  process.on('unhandledRejection', (reason: unknown) => {
    if (!isLmdbCommitFailure(reason) && !isLmdbWriteError(reason)) throw reason;
    // lmdb-js then rejects `commitError` too, with LMDB's own error, in the same turn
    if (isLmdbCommitFailure(reason)) reason.commitError.catch(() => undefined);
    const now = Date.now();
    if (now - lastLoggedAt < 1_000) {
      unlogged++;
      return;
    }
    lastLoggedAt = now;
    logger.error('LMDB failed a commit: the writes in it are refused', { error: String(reason), alsoFailedSinceLastLine: unlogged });
    unlogged = 0;
  });
};
