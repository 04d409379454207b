import { InProcessUpdateBus } from '../runtime/update-bus.js';
import type { Logger } from '../domain/logger.js';
import { progress } from '../domain/progress.js';
import { lockDataDir } from '../store/lmdb/data-dir-lock.js';
import { openLmdbNodeStore } from '../store/lmdb/lmdb-node-store.js';
import { composeNode, type RunningNode } from './node-composition.js';
import { NodeMetrics } from './node-metrics.js';
import type { ServeConfig } from './serve-config.js';

export type { RunningNode } from './node-composition.js';

/** The composition root of `statehold serve`: one process, LMDB storage, no other service. */
export const startEmbeddedNode = async (config: ServeConfig, logger: Logger, announce: (line: string) => void): Promise<RunningNode> => {
  // Before anything opens the files: a second node on the same data dir stops here (data-dir-lock.ts).
  const lock = await lockDataDir(config.dataDir);
  if (lock.unguarded) logger.warn(`${lock.unguarded}: nothing stops a second node on this data dir; run one only`);
  const store = openLmdbNodeStore(config.dataDir, {
    commitLog: config.commitLog,
    walApplyDelayMs: config.walApplyDelayMs,
    replayProgress: () => progress('applying the write-ahead log to LMDB', 'frames', config.progressEveryMs, (line) => logger.info(line)),
    onStorageFailure: (error) =>
      logger.error(
        'LMDB did not take writes the write-ahead log acknowledged: writes are refused until the node is restarted, which applies the log again',
        { error: error.message },
      ),
    onDataDirChanged: (problem) =>
      logger.error(`${problem}: writes are refused until the node is restarted (what it acknowledged since may be lost)`),
  });
  const metrics = new NodeMetrics();
  metrics.storeBacklog(() => store.instances.backlog());
  return composeNode(config, logger, announce, {
    metrics,
    storage: store,
    updates: new InProcessUpdateBus(),
    attach: (runtime) => ({
      writes: runtime,
      fire: (orgId, machine, name) => runtime.fireTimers(orgId, machine, name),
      deliver: (message) => runtime.receive(message),
    }),
    async close() {
      await store.close();
      await lock.release();
    },
  });
};
