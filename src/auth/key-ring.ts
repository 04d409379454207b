import type { Scope } from '../domain/scopes.js';
import type { Catalog } from '../store/catalog.js';
import type { SecretSealer } from './secret-sealer.js';

export interface SigningKey {
  id: string;
  orgId: string;
  scopes: ReadonlySet<Scope>;
  secret: Buffer;
}

/**
 * Signing keys by id, with their secrets unsealed once and kept in memory. A deleted key must be
 * forgotten here at once so its tokens stop working (the keys route calls `forget`).
 */
export class KeyRing {
  private readonly cache = new Map<string, SigningKey>();

  constructor(
    private readonly catalog: Catalog,
    private readonly sealer: SecretSealer,
  ) {}

  find(keyId: string): SigningKey | undefined {
    const cached = this.cache.get(keyId);
    if (cached) return cached;
    const record = this.catalog.getKey(keyId);
    if (!record) return undefined;
    const key: SigningKey = {
      id: record.id,
      orgId: record.orgId,
      scopes: new Set(record.scopes),
      secret: Buffer.from(this.sealer.open(record.sealedSecret, record.id), 'utf8'),
    };
    this.cache.set(keyId, key);
    return key;
  }

  forget(keyId: string): void {
    this.cache.delete(keyId);
  }
}
