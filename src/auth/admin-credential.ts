import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AdminKeyRecord } from '../domain/records.js';

/**
 * The operator credential. A generated key has 256 random bits, so a salted SHA-256 is enough to store
 * it: only the hash is kept. A key given through configuration is never stored at all.
 */
export class AdminCredential {
  private readonly salt: Buffer;
  private readonly hash: Buffer;

  private constructor(salt: Buffer, hash: Buffer) {
    this.salt = salt;
    this.hash = hash;
  }

  static fromSecret(secret: string): AdminCredential {
    const salt = randomBytes(16);
    return new AdminCredential(salt, digest(salt, secret));
  }

  static fromRecord(record: AdminKeyRecord): AdminCredential {
    return new AdminCredential(Buffer.from(record.salt, 'base64url'), Buffer.from(record.hash, 'base64url'));
  }

  toRecord(createdAt: string): AdminKeyRecord {
    return { salt: this.salt.toString('base64url'), hash: this.hash.toString('base64url'), createdAt };
  }

  matches(candidate: string): boolean {
    return timingSafeEqual(digest(this.salt, candidate), this.hash);
  }
}

const digest = (salt: Buffer, secret: string): Buffer => createHash('sha256').update(salt).update(secret, 'utf8').digest();
