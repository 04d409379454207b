import type { Database, RootDatabase } from 'lmdb';
import type { LogEntry, LogStore } from '../log-store.js';
import { msgpackOrJson } from './json-values.js';
import { type StorageWrites, storageWrites } from './storage-writes.js';

/**
 * Entries a batch at one log position may hold: a LOGS batch is at most ≈ 256 KB (replicated-logs.ts),
 * so far fewer; positions up to 2^33 keep `n` an exact integer.
 */
const PER_POSITION = 2 ** 20;

/**
 * logs [orgId, timestamp, n] -> LogEntry; `n` orders entries of the same millisecond. A batch with a
 * log position numbers its entries from it (the same keys when the batch comes again); one without, from
 * a counter of this process (the embedded node's own lines: a restart's come after the earlier ones).
 */
export class LmdbLogStore implements LogStore {
  private readonly logs: Database<LogEntry, [string, number, number]>;
  private counter = 0;

  constructor(
    root: RootDatabase,
    private readonly writes: StorageWrites = storageWrites(
      root,
      () => undefined,
      () => undefined,
    ),
  ) {
    this.logs = root.openDB({ name: 'logs', ...msgpackOrJson });
  }

  async appendLogs(entries: LogEntry[], position?: number): Promise<void> {
    if (position !== undefined && entries.length > PER_POSITION)
      throw new Error(`a batch of ${entries.length} log entries is more than one log position holds (${PER_POSITION})`);
    await this.writes.transaction(() => {
      entries.forEach((entry, i) => {
        const n = position === undefined ? this.counter++ : position * PER_POSITION + i;
        void this.logs.put([entry.orgId, entry.timestamp, n], entry);
      });
    });
  }

  async pruneBefore(orgId: string, cutoffMs: number): Promise<number> {
    return this.writes.transaction(() => {
      let removed = 0;
      for (const key of this.logs.getKeys({ start: [orgId, 0, 0], end: [orgId, cutoffMs, 0] })) {
        void this.logs.remove(key);
        removed++;
      }
      return removed;
    });
  }

  listLogs(orgId: string, fromMs: number, toMs: number, limit: number): LogEntry[] {
    return [...this.logs.getRange({ start: [orgId, fromMs, 0], end: [orgId, toMs, 0], limit }).map(({ value }) => value)];
  }
}
