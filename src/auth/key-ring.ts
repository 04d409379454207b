import type { Scope } from '../domain/scopes.js';
import type { Catalog } from '../store/catalog.js';
import type { SecretSealer } from './secret-sealer.js';

interface SigningKey {
  id: string;
  orgId: string;
  scopes: ReadonlySet<Scope>;
  secret: Buffer;
}

/**
 * Signing keys by id, with their secrets unsealed once and kept in memory. A deleted key stops
 * working at once: every lookup also asks the catalog whether the key still exists (one local read),
 * because in a cluster a key deleted through another node leaves this node's catalog as the META log
 * applies it, without passing through this node's keys route (which calls `forget`).
 */
export class KeyRing {
  private readonly cache = new Map<string, SigningKey>();

  constructor(
    private readonly catalog: Catalog,
    private readonly sealer: SecretSealer,
  ) {}

  find(keyId: string): SigningKey | undefined {
    const record = this.catalog.getKey(keyId);
    if (!record) {
      this.cache.delete(keyId);
      return undefined;
    }
    const cached = this.cache.get(keyId);
    if (cached) return cached;
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
