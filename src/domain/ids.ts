import { randomBytes, randomUUID } from 'node:crypto';
import { toBase64Url } from './base64url.js';

/** Prefixes of the pretty ids State Backed uses (wire-protocol §1.6); `mig_` is ours. */
type IdPrefix = 'org' | 'ver' | 'usr' | 'sbk' | 'mig' | 'msg';

/** prefix + '_' + unpadded base64url of the 16 bytes of a random UUID: 22 characters after the prefix. */
export const prettyId = (prefix: IdPrefix): string => {
  const hex = randomUUID().replaceAll('-', '');
  return `${prefix}_${toBase64Url(Buffer.from(hex, 'hex'))}`;
};

const prettyIdPattern = /^(org|ver|usr|sbk|mig|msg)_[A-Za-z0-9_-]{22}$/;

export const isPrettyId = (value: unknown, prefix: IdPrefix): value is string =>
  typeof value === 'string' && prettyIdPattern.test(value) && value.startsWith(`${prefix}_`);

/** A signing key's secret: `sbsec_` + 32 random bytes, base64url. */
export const newKeySecret = (): string => `sbsec_${toBase64Url(randomBytes(32))}`;

/** The operator credential: `shadm_` + 32 random bytes, base64url. It never contains a '.', unlike a JWT. */
export const newAdminKey = (): string => `shadm_${toBase64Url(randomBytes(32))}`;
