/** A line printed by machine code (or by the service about an instance), kept for the logs endpoint. */
export interface LogEntry {
  orgId: string;
  timestamp: number;
  level: string;
  versionId?: string;
  machine?: string;
  instance?: string;
  /** Console arguments as JSON-safe copies; structured objects stay objects. */
  args: unknown[];
}

export interface LogStore {
  /**
   * Keeps the entries. `position` is where the batch stands in a log that can hand it over again (the
   * cluster's LOGS stream sequence, replayed from a checkpoint after a crash): a batch kept again at the
   * same position replaces its first copy instead of adding to it.
   */
  appendLogs(entries: LogEntry[], position?: number): Promise<void>;
  /** Entries of one org from `fromMs` (inclusive) up to `toMs` (exclusive), oldest first. */
  listLogs(orgId: string, fromMs: number, toMs: number, limit: number): LogEntry[];
  /** Deletes the org's entries older than `cutoffMs`; resolves with how many. */
  pruneBefore(orgId: string, cutoffMs: number): Promise<number>;
}
