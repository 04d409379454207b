/**
 * What the writes through a node came to lately, for GET /health beside the log's stream info. The
 * stream's info can look healthy while nothing commits through this node: a route between two
 * nats-servers cut (NATS does not relay across a third server, so owners on the two sides cannot reach
 * each other while both see the log's leader), the JetStream meta leader out of reach (no partition
 * can be caught up), or a stream whose replicas diverged (every append fenced). A probe of a
 * 3-server cluster saw /health say 200 for 6 to 80 s while every write through the node failed. So a
 * node whose last few writes all failed, none succeeding since, says it cannot serve until one does.
 */
export class WriteOutcomes {
  /** When the writes that failed since the last success (or within the window) failed. */
  private failures: number[] = [];
  private lastFailure = '';

  constructor(
    private readonly options: { windowMs: number; minFailures: number; now?: () => number } = { windowMs: 3_000, minFailures: 3 },
  ) {}

  /** A write's outcome: undefined when it succeeded, else why it failed. */
  note(failure: string | undefined): void {
    if (failure === undefined) this.succeeded();
    else this.failed(failure);
  }

  succeeded(): void {
    this.failures = [];
  }

  failed(reason: string): void {
    const now = this.now();
    this.failures.push(now);
    this.lastFailure = reason;
    this.forgetOlder(now);
  }

  /** Why writes through this node look impossible now; undefined while they do not. */
  problem(): string | undefined {
    this.forgetOlder(this.now());
    if (this.failures.length < this.options.minFailures) return undefined;
    return `the last ${this.failures.length} writes through this node failed within ${this.options.windowMs / 1000} s and none succeeded (the last: ${this.lastFailure.slice(0, 200)})`;
  }

  private forgetOlder(now: number): void {
    const since = now - this.options.windowMs;
    while (this.failures.length > 0 && (this.failures[0] as number) < since) this.failures.shift();
    if (this.failures.length > 64) this.failures.splice(0, this.failures.length - 64);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}
