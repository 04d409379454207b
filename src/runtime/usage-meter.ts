import type { Logger } from '../domain/logger.js';
import { type InstanceStore, type UsageDelta, type UsageMonth, UncertainWriteError } from '../store/instance-store.js';

/**
 * Counts reads and transitions per org and machine in memory and writes them once a second, so
 * neither a read nor a commit pays for a counter page. A crash can lose up to a second of counts; they
 * are billing counters (wire-protocol §8.6), not history.
 */
export class UsageMeter {
  /** By org, then machine. */
  private readonly pending = new Map<string, Map<string, UsageDelta>>();
  private timer: NodeJS.Timeout | undefined;
  /** Every flush so far written (see flush). */
  private flushed: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: InstanceStore,
    private readonly logger: Logger,
    private readonly flushDelayMs = 1000,
  ) {}

  read(orgId: string, machine: string): void {
    this.add(orgId, machine, 0, 1);
  }

  transitions(orgId: string, machine: string, count: number): void {
    this.add(orgId, machine, count, 0);
  }

  /**
   * `write`, whose `count` transitions the caller counts once it resolves. Should it fail because the
   * store could not tell whether it was made (UncertainWriteError, a 503), they are counted once the
   * store finds it was: a retry of the request answered from the history counts nothing, so without
   * this they were lost.
   */
  countedIfMadeLate<T>(write: Promise<T>, orgId: string, machine: string, count: number): Promise<T> {
    return write.catch((error: unknown) => {
      if (error instanceof UncertainWriteError)
        void error.stored.then((made) => {
          if (made) this.transitions(orgId, machine, count);
        });
      throw error;
    });
  }

  /** The org's months, newest first, with what is still in memory written first. */
  async months(orgId: string, months: number): Promise<UsageMonth[]> {
    await this.flush();
    return this.store.listUsage(orgId, months);
  }

  private add(orgId: string, machine: string, transitions: number, reads: number): void {
    let machines = this.pending.get(orgId);
    if (!machines) {
      machines = new Map();
      this.pending.set(orgId, machines);
    }
    const current = machines.get(machine);
    if (current) {
      current.transitions += transitions;
      current.reads += reads;
    } else machines.set(machine, { transitions, reads });
    this.timer ??= setTimeout(() => void this.flush(), this.flushDelayMs);
  }

  /**
   * Writes what is pending; resolves once that and every flush before it are written: a read of the
   * months right after must not miss counts a timer's flush took out of `pending` and was still writing.
   */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = [...this.pending].flatMap(([orgId, machines]) => [...machines].map(([machine, usage]) => ({ orgId, machine, usage })));
    this.pending.clear();
    const written = Promise.all(
      batch.map(({ orgId, machine, usage }) =>
        this.store
          .addUsage(orgId, usage, machine)
          .catch((error: unknown) => this.logger.error('could not record usage', { error: String(error) })),
      ),
    );
    this.flushed = Promise.all([this.flushed, written]).then(() => undefined);
    return this.flushed;
  }
}
