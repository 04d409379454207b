/**
 * Token buckets by key: `perSecond` tokens a second, at most `burst` saved up. In memory: this node is
 * the only writer of its data dir, and a restart merely refills the buckets.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one token from `key`'s bucket; false when it is empty. */
  take(key: string): boolean {
    const at = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((at - bucket.at) / 1000) * this.perSecond);
    bucket.at = at;
    this.buckets.set(key, bucket);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}
