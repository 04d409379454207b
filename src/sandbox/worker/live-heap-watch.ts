/**
 * Watches how much of one version's isolate its live actors hold, for the node to keep it within the
 * live-actor budget (--live-actor-memory-mb) by evicting the least recently used ones.
 *
 * Every live actor is an xstate interpreter inside the version's isolate (≈ 7 KB each for a small
 * counter machine, measured here), so a popular version's heap grows with how many of its instances
 * are live, not with what its machine code does. The isolate's V8 limit is the machine-code limit plus
 * this budget (version-isolate.ts), and this watch keeps the live part within its budget: it reads the
 * heap every SAMPLE_EVERY step calls (a read costs ≈ 6 µs; one every 32 calls is ≈ 0.2 µs a call) and
 * says when what the isolate holds beyond what it held once loaded is over the budget.
 *
 * What the heap holds between collections is live actors plus garbage not yet collected, so a report
 * can come before the live actors alone fill the budget: evicting is cheap (an evicted instance reloads
 * from its committed snapshot) and the other way is a memory error. The node answers a report by
 * capping how many actors may be live in the version (actor-registry.ts), which holds until the watch
 * reads the heap back within the budget (a collection freed what was evicted) and says so. While it
 * stays over, the watch reports again every REARM_AFTER_CALLS calls (busy actors are not evicted, and
 * what each actor holds may have grown), not at every reading: the garbage of what was evicted is
 * still counted until a collection, and reporting it would evict more for nothing.
 */
export const SAMPLE_EVERY = 32;
export const REARM_AFTER_CALLS = 4096;

export class LiveHeapWatch {
  private calls = 0;
  /** The call count of the last report over the budget, while the heap has not read within it since. */
  private reportedAt: number | undefined;

  constructor(
    /** What the live actors may hold, in bytes. */
    readonly budgetBytes: number,
    /** The isolate's used heap now, in bytes. */
    private readonly heapUsed: () => number,
    /** What the isolate held once its version was loaded (code, harness, globals): not the actors'. */
    private readonly baselineBytes: number = heapUsed(),
  ) {}

  /**
   * After a step call (start, send, advance) on the isolate: the bytes the live actors hold, when the
   * node should hear of it (over the budget and due for a report, or back within it after one).
   */
  afterStep(): number | undefined {
    this.calls++;
    if (this.calls % SAMPLE_EVERY !== 0) return undefined;
    const held = this.heapUsed() - this.baselineBytes;
    if (held <= this.budgetBytes) {
      if (this.reportedAt === undefined) return undefined;
      this.reportedAt = undefined;
      return held;
    }
    if (this.reportedAt !== undefined && this.calls - this.reportedAt < REARM_AFTER_CALLS) return undefined;
    this.reportedAt = this.calls;
    return held;
  }
}
