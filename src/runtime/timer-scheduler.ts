import type { Logger } from '../domain/logger.js';
import type { DueTimer, InstanceStore } from '../store/instance-store.js';
import { actorKey } from './actor-key.js';
import type { TimerFiring } from './instance-runtime.js';

/** 'not-owner': another cluster node owns the instance and fires its timers; looked at again later. */
type FireTimers = (orgId: string, machine: string, name: string) => Promise<TimerFiring | 'not-owner'>;

/** How long a timer of an instance another node owns is left alone before this node looks again (it may own it by then). */
const NOT_OWNER_RECHECK_MS = 1_000;

/** Longest sleep between looks at the index, in case a wake-up was missed. */
const MAX_SLEEP_MS = 5_000;
/** How often to look again while deliveries are in flight (their own entries stay due until they commit). */
const IN_FLIGHT_POLL_MS = 20;
/** After a delivery failed unexpectedly (not a machine failure: those are retried by the runtime). */
const FAILURE_BACKOFF_MS = 1_000;
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
  /** Instances whose last delivery failed unexpectedly, and when to try them again. */
  private readonly backoff = new Map<string, number>();
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
    this.timer = setTimeout(() => this.wake(), Math.max(0, wakeAt - now));
  }

  private wake(): void {
    this.timer = undefined;
    this.armedFor = undefined;
    if (this.stopped) return;
    let backingOff = false;
    try {
      const now = Date.now();
      const byInstance = new Map<string, DueTimer[]>();
      for (const entry of this.store.listDueTimers(now, BATCH)) {
        const key = actorKey(entry.orgId, entry.machine, entry.name);
        if (this.firing.has(key)) continue;
        const notBefore = this.backoff.get(key);
        if (notBefore !== undefined && notBefore > now) {
          backingOff = true;
          continue;
        }
        const entries = byInstance.get(key);
        if (entries) entries.push(entry);
        else byInstance.set(key, [entry]);
      }
      for (const [key, entries] of byInstance) void this.fireOne(key, entries);
    } catch (error) {
      this.logger.error('timer scheduler failed to read due timers', { error: String(error) });
      this.arm(Date.now() + FAILURE_BACKOFF_MS);
      return;
    }
    this.rearm(backingOff);
  }

  private async fireOne(key: string, entries: DueTimer[]): Promise<void> {
    const [first] = entries;
    if (!first) return;
    this.firing.add(key);
    try {
      const outcome = await this.fire(first.orgId, first.machine, first.name);
      this.backoff.delete(key);
      if (outcome === 'not-owner') this.backoff.set(key, Date.now() + NOT_OWNER_RECHECK_MS);
      // Index entries no head lists any more must not make the scheduler spin.
      if (outcome === 'nothing-due') await this.store.removeDueTimers(entries);
    } catch (error) {
      this.backoff.set(key, Date.now() + FAILURE_BACKOFF_MS);
      this.logger.error('delivering a delayed event failed', { instance: key, error: String(error) });
    } finally {
      this.firing.delete(key);
      this.rearm(false);
    }
  }

  private rearm(backingOff: boolean): void {
    if (this.stopped) return;
    try {
      const next = this.store.nextTimerDue();
      const now = Date.now();
      if (next === undefined) this.arm(now + MAX_SLEEP_MS);
      else if (next <= now && (this.firing.size > 0 || backingOff)) this.noteDue(now + IN_FLIGHT_POLL_MS);
      else this.noteDue(next);
    } catch (error) {
      this.logger.error('timer scheduler failed to read due timers', { error: String(error) });
      this.arm(Date.now() + FAILURE_BACKOFF_MS);
    }
  }
}
