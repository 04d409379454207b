import { OAuthError, ServiceError } from '../domain/errors.js';
import type { ApiResponse } from './http-types.js';

/**
 * The one place errors become HTTP: `{error, code, parameter?}` as the State Backed client reads them
 * (wire-protocol §1.4), or the OAuth shape for token exchange. Anything that is not a ServiceError is a bug: log it, answer 500 without
 * leaking its message.
 */
export const errorResponse = (error: unknown, log: (message: string, error: unknown) => void): ApiResponse => {
  if (error instanceof OAuthError) {
    return {
      status: error.status,
      body: { error: error.oauthCode, error_description: error.message, code: error.oauthCode },
      headers: { 'cache-control': 'no-store' },
    };
  }
  if (error instanceof ServiceError) {
    const body: Record<string, string> = { error: error.message, code: error.code };
    if (error.parameter !== undefined) body.parameter = error.parameter;
    return { status: error.status, body };
  }
  log('unexpected error while handling a request', error);
  return { status: 500, body: { error: 'internal error', code: 'internal' } };
};
