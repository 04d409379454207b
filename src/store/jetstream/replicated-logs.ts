import type { LogEntry, LogStore } from '../log-store.js';
import type { ApplyOp, JetStreamOpLog } from './op-log.js';

const BATCH_BYTES = 256 * 1024;

/** A batch of machine logs as it travels in the cluster's LOGS log. */
export interface LogsOp {
  entries: LogEntry[];
}

/**
 * Writes a batch from the LOGS log into this node's local log store (every node, in log order), at its
 * stream sequence: a batch replayed after a crash (from the last checkpoint) replaces its copy.
 */
export const applyLogsOp =
  (local: LogStore): ApplyOp<LogsOp> =>
  (op, seq) =>
    local.appendLogs(op.entries, seq);

/**
 * The machine logs of a cluster node: what machine code prints runs on the instance's owner, but the
 * logs endpoint answers on any node, so each batch goes through the cluster's LOGS log (a JetStream
 * stream that keeps it as long as the log retention) and every node writes it into its own LMDB log
 * store, where reads are answered. Pruning stays local: each node drops its own copy's old entries.
 */
export class ReplicatedLogStore implements LogStore {
  constructor(
    private readonly local: LogStore,
    private readonly log: JetStreamOpLog<LogsOp>,
  ) {}

  async appendLogs(entries: LogEntry[]): Promise<void> {
    // Batches of at most ≈ 256 KB, well under NATS's max_payload (1 MB unless configured). A log line
    // needs no read-your-writes on other nodes: no waiting for them.
    let batch: LogEntry[] = [];
    let bytes = 0;
    for (const entry of entries) {
      const size = JSON.stringify(entry).length;
      if (batch.length > 0 && bytes + size > BATCH_BYTES) {
        await this.log.submit({ entries: batch }, { everywhere: false });
        batch = [];
        bytes = 0;
      }
      batch.push(entry);
      bytes += size;
    }
    if (batch.length > 0) await this.log.submit({ entries: batch }, { everywhere: false });
  }

  listLogs(orgId: string, fromMs: number, toMs: number, limit: number): LogEntry[] {
    return this.local.listLogs(orgId, fromMs, toMs, limit);
  }

  pruneBefore(orgId: string, cutoffMs: number): Promise<number> {
    return this.local.pruneBefore(orgId, cutoffMs);
  }
}
