import type { Logger } from '../domain/logger.js';
import type { DueTimer, InstanceStore } from '../store/instance-store.js';
import type { TimerFiring } from './instance-runtime.js';

type FireTimers = (orgId: string, machine: string, name: string) => Promise<TimerFiring>;

/** Longest sleep between looks at the index, in case a wake-up was missed. */
const MAX_SLEEP_MS = 5_000;
/** How often to look again while deliveries are in flight. */
const IN_FLIGHT_POLL_MS = 20;
/** Due entries handled per wake-up; the rest wait for the next one, right after. */
const BATCH = 1_000;

/**
 * Fires durable timers. Pending timers live in the store's due-time index, not in JavaScript timers:
 * the scheduler keeps one JS timer, armed for the earliest due entry, and on waking asks the runtime
 * to deliver what is due, one instance at a time through its mailbox.
 */
export class TimerScheduler {
  private timer: NodeJS.Timeout | undefined;
  private armedFor: number | undefined;
  private readonly firing = new Set<string>();
  private waking = false;
  private stopped = false;

  constructor(
    private readonly store: InstanceStore,
    private readonly fire: FireTimers,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.arm(Date.now());
  }

  /** A commit left a timer due at `dueAt`: wake earlier than planned if needed. */
  noteDue(dueAt: number): void {
    if (this.stopped) return;
    if (this.armedFor === undefined || dueAt < this.armedFor) this.arm(dueAt);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(at: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    const now = Date.now();
    const wakeAt = Math.min(at, now + MAX_SLEEP_MS);
    this.armedFor = wakeAt;
    this.timer = setTimeout(() => void this.wake(), Math.max(0, wakeAt - now));
  }

  private async wake(): Promise<void> {
    this.timer = undefined;
    this.armedFor = undefined;
    if (this.waking || this.stopped) return;
    this.waking = true;
    try {
      const now = Date.now();
      const due = this.store.listDueTimers(now, BATCH);
      const byInstance = new Map<string, DueTimer[]>();
      for (const entry of due) {
        const key = `${entry.orgId}/${entry.machine}/${entry.name}`;
        if (this.firing.has(key)) continue;
        byInstance.set(key, [...(byInstance.get(key) ?? []), entry]);
      }
      for (const [key, entries] of byInstance) void this.fireOne(key, entries);
    } catch (error) {
      this.logger.error('timer scheduler failed to read due timers', { error: String(error) });
    } finally {
      this.waking = false;
    }
    this.rearm();
  }

  private async fireOne(key: string, entries: DueTimer[]): Promise<void> {
    const [first] = entries;
    if (!first) return;
    this.firing.add(key);
    try {
      const outcome = await this.fire(first.orgId, first.machine, first.name);
      // Index entries no head lists any more must not make the scheduler spin.
      if (outcome === 'nothing-due') await this.store.removeDueTimers(entries);
    } catch (error) {
      this.logger.error('delivering a delayed event failed', { instance: key, error: String(error) });
    } finally {
      this.firing.delete(key);
      this.rearm();
    }
  }

  private rearm(): void {
    const next = this.store.nextTimerDue();
    const now = Date.now();
    if (next === undefined) this.arm(now + MAX_SLEEP_MS);
    // While deliveries are in flight their own entries stay due until they commit: look again
    // shortly rather than spin on them.
    else if (next <= now && this.firing.size > 0) this.noteDue(now + IN_FLIGHT_POLL_MS);
    else this.noteDue(next);
  }
}
