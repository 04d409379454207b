import { randomUUID } from 'node:crypto';
import { type UsageDelta, usageMonth } from '../instance-store.js';

/** One node's counts of about a second for one org (and machine). */
export interface UsageCounts {
  orgId: string;
  usage: UsageDelta;
  machine: string | undefined;
  atMs: number;
}

/**
 * Counts as the META log carries them: with what this node's process (its `run`) has counted so far
 * for the org, the month of `atMs` and the machine, `totals`. Every node keeps the last totals of each
 * run and adds what a batch's exceed them by (LmdbInstanceStore.addUsage), so copies of the log that
 * differ (a batch missing from one, there twice or out of order: a nats-server's copy that diverged
 * under a partition, cluster/README.md, What is left, 13) still sum to the same counts once a later
 * batch of each run has arrived.
 */
export interface UsageBatch extends UsageCounts {
  run: string;
  totals: UsageDelta;
}

interface SharedUsageOptions {
  /**
   * Puts a batch in the cluster's log. A second submit of one whose answer was lost may store it twice:
   * its totals make that count once (no JetStream message id: see log-entries.ts ENTRY_ID_HEADER).
   */
  submit: (batch: UsageBatch) => Promise<void>;
  /** Told once when batches start being held (the log does not take them), and once when they went through again. */
  log: (level: 'warn' | 'info', message: string) => void;
  /** First wait before a held batch is sent again; doubles up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** Held batches kept at most (the oldest go beyond, said in one line). */
  maxHeld?: number;
  /** How long after a batch, if no other of its org, month and machine follows, its totals are sent once more (5 s). */
  echoMs?: number;
}

const NOTHING: UsageDelta = { transitions: 0, reads: 0 };

/**
 * Usage counts on their way to every node, through the cluster's META log. A batch the log does not
 * take (no JetStream leader reachable: a partition, a nats-server restarting, an election; the client
 * then says "jetstream is not enabled") is held and sent again, in the background, until it is taken:
 * counts are not lost to an outage, nor counted twice when an answer was lost (the totals), and an
 * outage is said once, not once a second.
 */
export class SharedUsage {
  private held: UsageBatch[] = [];
  private timer: NodeJS.Timeout | undefined;
  private waitMs: number;
  private heldSince: number | undefined;
  private dropped = 0;
  private sending = false;
  /** First submits under way: one sent before an outage may fail after the held ones went through. */
  private inFlight = 0;
  /** This process's counting run: its totals start from nothing. */
  readonly run = randomUUID();
  /** What this run counted, by month (the latest two), then by org and machine. */
  private readonly totals = new Map<string, Map<string, UsageDelta>>();
  /** The last batch of each org, month and machine, until its totals were sent again (see echo). */
  private readonly toEcho = new Map<string, { batch: UsageBatch; at: number }>();
  private echoTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SharedUsageOptions) {
    this.waitMs = options.retryMs ?? 500;
  }

  /** Batches waiting to be sent again. */
  get pending(): number {
    return this.held.length;
  }

  /** Resolves once the counts are in the log, or held for later: never rejects. */
  async add(counts: UsageCounts): Promise<void> {
    const { batch, key } = this.withTotals(counts);
    this.toEcho.set(key, { batch, at: Date.now() });
    this.echoTimer ??= setInterval(() => this.echo(), this.options.echoMs ?? 5_000).unref();
    await this.send(batch);
  }

  /**
   * Sends once more, with nothing to add, the totals of each org, month and machine that no batch
   * followed for `echoMs`: a copy of the log that lost a run's last batch gets its totals from this one.
   */
  private echo(): void {
    const now = Date.now();
    for (const [key, { batch, at }] of this.toEcho) {
      if (now - at < (this.options.echoMs ?? 5_000)) continue;
      this.toEcho.delete(key);
      void this.send({ ...batch, usage: NOTHING });
    }
    if (this.toEcho.size === 0) {
      clearInterval(this.echoTimer);
      this.echoTimer = undefined;
    }
  }

  private async send(batch: UsageBatch): Promise<void> {
    if (this.held.length > 0) {
      // (while others wait, no point in asking the log now: the retry sends them all, oldest first)
      this.hold(batch, undefined);
      return;
    }
    this.inFlight++;
    try {
      await this.options.submit(batch);
    } catch (error) {
      this.hold(batch, error);
    } finally {
      this.inFlight--;
      this.ended();
    }
  }

  /** Sends what is held at once (a node that stops). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.retry();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    clearInterval(this.echoTimer);
    this.echoTimer = undefined;
  }

  /** The counts with this run's totals so far, and the key of their month, org and machine. */
  private withTotals(counts: UsageCounts): { batch: UsageBatch; key: string } {
    const month = usageMonth(counts.atMs);
    let ofMonth = this.totals.get(month);
    if (!ofMonth) {
      ofMonth = new Map();
      this.totals.set(month, ofMonth);
      // (a batch of the month before may still come, counted just before it turned; none older)
      for (const older of [...this.totals.keys()].sort().slice(0, -2)) this.totals.delete(older);
    }
    const key = JSON.stringify([counts.orgId, counts.machine ?? '']);
    const before = ofMonth.get(key) ?? { transitions: 0, reads: 0 };
    const totals = { transitions: before.transitions + counts.usage.transitions, reads: before.reads + counts.usage.reads };
    ofMonth.set(key, totals);
    return { batch: { ...counts, run: this.run, totals }, key: `${month} ${key}` };
  }

  private hold(batch: UsageBatch, error: unknown): void {
    if (this.heldSince === undefined) {
      this.heldSince = Date.now();
      const reason = error instanceof Error ? error.message : String(error ?? 'the log is not taking writes');
      this.options.log(
        'warn',
        `could not record usage in the cluster's log (${reason}): the counts are kept and sent again until it takes them`,
      );
    }
    this.held.push(batch);
    const max = this.options.maxHeld ?? 10_000;
    if (this.held.length > max) {
      this.dropped += this.held.length - max;
      this.held.splice(0, this.held.length - max);
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.sending) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.retry();
    }, this.waitMs);
    this.timer.unref();
  }

  private async retry(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    try {
      while (this.held.length > 0) {
        const next = this.held[0] as UsageBatch;
        try {
          await this.options.submit(next);
        } catch {
          this.waitMs = Math.min(this.waitMs * 2, this.options.maxRetryMs ?? 5_000);
          return;
        }
        this.held.shift();
      }
      this.waitMs = this.options.retryMs ?? 500;
    } finally {
      this.sending = false;
      if (this.held.length > 0) this.schedule();
      else this.ended();
    }
  }

  /**
   * Says once that an outage ended: nothing held, nothing being sent again, and no first submit still
   * under way (one sent during the outage can fail after the held ones went through: the same outage).
   */
  private ended(): void {
    if (this.heldSince === undefined || this.held.length > 0 || this.sending || this.inFlight > 0) return;
    const since = Date.now() - this.heldSince;
    const lost = this.dropped > 0 ? `; ${this.dropped} batches beyond the ${this.options.maxHeld ?? 10_000} kept were dropped` : '';
    this.options.log('info', `usage recorded in the cluster's log again, after ${(since / 1000).toFixed(1)} s${lost}`);
    this.heldSince = undefined;
    this.dropped = 0;
  }
}
