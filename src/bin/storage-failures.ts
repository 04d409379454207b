import type { Logger } from '../domain/logger.js';

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
    if (!isLmdbCommitFailure(reason)) throw reason;
    // lmdb-js then rejects `commitError` too, with LMDB's own error, in the same turn
    if (reason instanceof Error && 'commitError' in reason) (reason.commitError as Promise<unknown>).catch(() => undefined);
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

/**
 * lmdb-js's error for the writes of a failed commit (write.js rejectCommit: that message, and
 * `commitError`), or LMDB's own error it rejects `commitError` with (a numeric `code`, thrown in lmdb-js).
 */
const isLmdbCommitFailure = (reason: unknown): boolean =>
  reason instanceof Error &&
  (('commitError' in reason && reason.message.startsWith('Commit failed')) ||
    (typeof (reason as { code?: unknown }).code === 'number' && /[\\/]node_modules[\\/]lmdb[\\/]/.test(reason.stack ?? '')));
