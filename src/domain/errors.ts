/**
 * Errors as typed values. Every layer throws `ServiceError`s; the API layer maps them to HTTP in one
 * place (src/api/error-response.ts). The codes are the ones the State Backed client dispatches on
 * (wire-protocol §1.4). A list, not only a type, so that the API's
 * description (GET /openapi.json) can name every one.
 */
import { clipped } from './clipped.js';
import { limits } from './limits.js';

export const errorCodes = [
  'invalid-parameter',
  'specify-org',
  'no-migration-path',
  'missing-scope',
  'rejected-by-machine-authorizer',
  'missing-user',
  'missing-org',
  'invalid-state',
  'unauthorized',
  'not-found',
  'conflict',
  'payload-too-large',
  'rate-limited',
  'unavailable',
  'machine-code-error',
  'context-too-large',
  'state-too-large',
  'settle-timeout',
  'internal',
] as const;

export type ErrorCode = (typeof errorCodes)[number];

export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly parameter?: string,
  ) {
    super(message);
    this.name = 'ServiceError';
  }
}

/**
 * A refused token exchange (`POST /tokens`), answered the OAuth way (RFC 6749 §5.2, RFC 8693 §2.2.2):
 * `{error: <oauth code>, error_description}`, with `code` the same so the State Backed client keeps it.
 */
export const oauthErrorCodes = [
  'invalid_request',
  'unsupported_grant_type',
  'invalid_grant',
  'temporarily_unavailable',
  'slow_down',
] as const;

type OAuthErrorCode = (typeof oauthErrorCodes)[number];

const oauthStatus: Record<OAuthErrorCode, [number, ErrorCode]> = {
  invalid_request: [400, 'invalid-parameter'],
  unsupported_grant_type: [400, 'invalid-parameter'],
  // 403, not RFC 6749's 400: the State Backed client maps only 403 to its UnauthorizedError (§1.4)
  invalid_grant: [403, 'unauthorized'],
  temporarily_unavailable: [503, 'unavailable'],
  slow_down: [429, 'rate-limited'],
};

export class OAuthError extends ServiceError {
  constructor(
    readonly oauthCode: OAuthErrorCode,
    message: string,
  ) {
    super(oauthStatus[oauthCode][0], oauthStatus[oauthCode][1], message);
    this.name = 'OAuthError';
  }
}

export const invalidParameter = (parameter: string, message: string): ServiceError =>
  new ServiceError(400, 'invalid-parameter', message, parameter);

export const specifyOrg = (): ServiceError =>
  new ServiceError(400, 'specify-org', 'this credential spans several orgs: set the x-statebacked-org-id header');

export const noMigrationPath = (from: string, to: string): ServiceError =>
  new ServiceError(
    400,
    'no-migration-path',
    `no chain of migrations leads from version ${from} to version ${to}: create migrations between them first`,
  );

export const unauthorized = (message: string): ServiceError => new ServiceError(403, 'unauthorized', message);

export const missingScope = (scopes: readonly string[]): ServiceError =>
  new ServiceError(403, 'missing-scope', `this credential lacks the required scope: ${scopes.join(' or ')}`);

/** A key asked to hand out (or take away) scopes it does not have itself: `what` it may do only within its own. */
export const scopesBeyondKey = (what: string, lacking: readonly string[]): ServiceError =>
  new ServiceError(403, 'missing-scope', `a key may ${what} only within the scopes it has itself; this one lacks ${lacking.join(', ')}`);

export const missingOrg = (message: string): ServiceError => new ServiceError(403, 'missing-org', message);

export const missingUser = (message: string): ServiceError => new ServiceError(403, 'missing-user', message);

export const notFound = (message: string): ServiceError => new ServiceError(404, 'not-found', message);

/** The 404 of an instance that does not exist (where it may be a copy behind the log: cluster/forwarder.ts). */
export class InstanceNotFoundError extends ServiceError {
  constructor(machine: string, name: string) {
    super(404, 'not-found', `instance ${name} of machine ${machine} does not exist`);
  }
}

export const conflict = (message: string): ServiceError => new ServiceError(409, 'invalid-state', message);

export const payloadTooLarge = (message: string): ServiceError => new ServiceError(413, 'payload-too-large', message);

/** Too many requests from one caller (an org, a client address, a socket) for a documented rate. */
export const rateLimited = (message: string): ServiceError => new ServiceError(429, 'rate-limited', message);

export const unavailable = (message: string): ServiceError => new ServiceError(503, 'unavailable', message);

export const rejectedByAuthorizer = (which: 'allowRead' | 'allowWrite'): ServiceError =>
  new ServiceError(403, 'rejected-by-machine-authorizer', `the machine's ${which} refused this request`);

/**
 * Machine code failed while handling a request: the instance is left as if the request never came. The
 * message (which machine code chooses in part) is clipped to limits.maxMachineErrorChars.
 */
export const machineCodeFailed = (message: string): ServiceError =>
  new ServiceError(400, 'machine-code-error', clipped(message, limits.maxMachineErrorChars));

export const contextTooLarge = (bytes: number, limit: number): ServiceError =>
  new ServiceError(
    400,
    'context-too-large',
    `the transition would leave a context of ${bytes} bytes of JSON, above the limit of ${limit} bytes; the event was not applied`,
  );

export const stateTooLarge = (bytes: number, limit: number): ServiceError =>
  new ServiceError(
    400,
    'state-too-large',
    `the transition would leave ${bytes} bytes of state to persist (snapshot and pending delayed events), above the limit of ${limit} bytes; the event was not applied`,
  );
