/**
 * Token buckets by key: `perSecond` tokens a second, at most `burst` saved up. In memory: this node is
 * the only writer of its data dir, and a restart merely refills the buckets. At most `maxKeys` buckets
 * are kept (least recently used dropped first), since keys such as client addresses come from outside;
 * a dropped bucket comes back full, which only matters to a caller with that many addresses, and other
 * limits (per org) still hold for it.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
    private readonly maxKeys = 100_000,
  ) {}

  /** Takes one token from `key`'s bucket; false when it is empty. */
  take(key: string): boolean {
    const at = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((at - bucket.at) / 1000) * this.perSecond);
    bucket.at = at;
    // (re-inserted, so the Map's order is least recently used first)
    this.buckets.delete(key);
    this.buckets.set(key, bucket);
    if (this.buckets.size > this.maxKeys) this.buckets.delete(this.buckets.keys().next().value as string);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}
