import { randomUUID } from 'node:crypto';

/**
 * An `x-request-id` the caller gave is kept when it is short and plain (a proxy's or a client's id,
 * to follow one request through logs); anything else (too long, spaces, control or non-ASCII
 * characters, which would garble a log line or a header) gets a fresh one instead.
 */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:/+=@-]{1,128}$/;

export const requestIdOf = (given: string | undefined): string =>
  given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID();
