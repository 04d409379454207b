import type { Database, RootDatabase } from 'lmdb';
import type { LogEntry, LogStore } from '../log-store.js';

/** logs [orgId, timestamp, n] -> LogEntry; `n` orders entries of the same millisecond. */
export class LmdbLogStore implements LogStore {
  private readonly logs: Database<LogEntry, [string, number, number]>;
  private counter = 0;

  constructor(root: RootDatabase) {
    this.logs = root.openDB({ name: 'logs', encoding: 'msgpack' });
  }

  async appendLogs(entries: LogEntry[]): Promise<void> {
    await this.logs.transaction(() => {
      for (const entry of entries) void this.logs.put([entry.orgId, entry.timestamp, this.counter++], entry);
    });
  }

  async pruneBefore(orgId: string, cutoffMs: number): Promise<number> {
    return this.logs.transaction(() => {
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
