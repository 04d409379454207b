import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalidParameter } from './errors.js';

/**
 * Destructive calls prove intent with an HMAC-SHA256 keyed by the machine name (wire-protocol §3.1,
 * §3.4), sent as base64url. We accept it with or without padding.
 */
const deletionConfirmation = (machineName: string, message: string): string =>
  createHmac('sha256', Buffer.from(machineName, 'utf8')).update(Buffer.from(message, 'utf8')).digest('base64url');

const isValidDeletionConfirmation = (machineName: string, message: string, given: unknown): boolean => {
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(deletionConfirmation(machineName, message));
  const actual = Buffer.from(given.replace(/=+$/, ''));
  return expected.length === actual.length && timingSafeEqual(expected, actual);
};

/**
 * The body of a destructive call must say `dangerDataWillBeDeletedForever: true` and carry the HMAC of
 * `message` keyed by the machine name in `field`; a 400 names whichever parameter is wrong.
 */
export const requireDeletionConfirmation = (
  body: Record<string, unknown>,
  machineName: string,
  message: string,
  field: string,
  what: string,
): void => {
  if (body.dangerDataWillBeDeletedForever !== true) {
    throw invalidParameter('dangerDataWillBeDeletedForever', 'dangerDataWillBeDeletedForever must be true');
  }
  if (!isValidDeletionConfirmation(machineName, message, body[field])) {
    throw invalidParameter(field, `${field} must be the base64url HMAC-SHA256 of the ${what} name keyed by the machine name`);
  }
};
