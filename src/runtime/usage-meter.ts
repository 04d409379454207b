import type { Logger } from '../domain/logger.js';
import type { InstanceStore, UsageDelta } from '../store/instance-store.js';

/**
 * Counts reads and transitions per org in memory and writes them once a second, so neither a read nor
 * a commit pays for a counter page. A crash can lose up to a second of counts; they are billing
 * counters (wire-protocol §8.6), not history.
 */
export class UsageMeter {
  private readonly pending = new Map<string, UsageDelta>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: InstanceStore,
    private readonly logger: Logger,
    private readonly flushDelayMs = 1000,
  ) {}

  read(orgId: string): void {
    this.add(orgId, 0, 1);
  }

  transitions(orgId: string, count: number): void {
    this.add(orgId, count, 0);
  }

  private add(orgId: string, transitions: number, reads: number): void {
    const current = this.pending.get(orgId) ?? { transitions: 0, reads: 0 };
    this.pending.set(orgId, { transitions: current.transitions + transitions, reads: current.reads + reads });
    this.timer ??= setTimeout(() => void this.flush(), this.flushDelayMs);
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = [...this.pending];
    this.pending.clear();
    await Promise.all(
      batch.map(([orgId, usage]) =>
        this.store.addUsage(orgId, usage).catch((error: unknown) => this.logger.error('could not record usage', { error: String(error) })),
      ),
    );
  }
}
