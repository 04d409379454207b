import type { Logger } from '../domain/logger.js';
import type { InstanceStore } from '../store/instance-store.js';

/**
 * Counts reads per org in memory and writes them once a second: a read must not cost a disk write.
 * Transitions are counted inside their own commit instead.
 */
export class UsageMeter {
  private readonly reads = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: InstanceStore,
    private readonly logger: Logger,
    private readonly flushDelayMs = 1000,
  ) {}

  read(orgId: string): void {
    this.reads.set(orgId, (this.reads.get(orgId) ?? 0) + 1);
    this.timer ??= setTimeout(() => void this.flush(), this.flushDelayMs);
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = [...this.reads];
    this.reads.clear();
    await Promise.all(
      batch.map(([orgId, reads]) =>
        this.store.addUsage(orgId, { transitions: 0, reads }).catch((error: unknown) => this.logger.error('could not record usage', { error: String(error) })),
      ),
    );
  }
}
