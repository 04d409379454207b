import type { Logger } from '../domain/logger.js';
import type { CapturedLog } from '../sandbox/index.js';
import type { LogEntry, LogStore } from '../store/log-store.js';
import { parseActorKey } from './actor-key.js';

/**
 * Collects console output of machine code and the service's own lines about instances, and writes
 * them in batches so logging never adds a disk sync to a request.
 */
export class LogSink {
  private pending: LogEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: LogStore,
    private readonly logger: Logger,
    private readonly flushDelayMs = 100,
  ) {}

  /** Console output of machine code of `machine`; authorizers report the instance by name only. */
  captured(orgId: string, machine: string, log: CapturedLog): void {
    const actor = log.instanceKey ? parseActorKey(log.instanceKey) : undefined;
    const instance = actor?.name ?? log.machineInstanceName;
    this.add({
      orgId,
      timestamp: log.timestamp,
      level: log.level,
      versionId: log.versionId,
      machine,
      ...(instance !== undefined ? { instance } : {}),
      args: log.args,
    });
  }

  /** A line of the service's own about an instance (child stopped, authorizer threw, ...), with the version it concerns when known. */
  service(
    orgId: string,
    machine: string,
    instance: string,
    level: 'info' | 'warn' | 'error',
    message: string,
    fields: Record<string, unknown> = {},
    versionId?: string,
  ): void {
    this.add({
      orgId,
      timestamp: Date.now(),
      level,
      machine,
      instance,
      ...(versionId !== undefined ? { versionId } : {}),
      args: [{ source: 'statehold', message, ...fields }],
    });
  }

  /** Drops entries older than the retention, org by org. */
  async prune(orgIds: string[], retentionMs: number): Promise<void> {
    const cutoff = Date.now() - retentionMs;
    for (const orgId of orgIds) {
      const removed = await this.store.pruneBefore(orgId, cutoff);
      if (removed > 0) this.logger.info('pruned old machine logs', { org: orgId, removed });
    }
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    if (batch.length > 0) {
      this.flushing = this.flushing
        .then(() => this.store.appendLogs(batch))
        .catch((error: unknown) => this.logger.error('could not store machine logs', { error: String(error) }));
    }
    await this.flushing;
  }

  private add(entry: LogEntry): void {
    this.pending.push(entry);
    if (this.pending.length >= 1000) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.flushDelayMs);
  }
}
