import type { Authenticator } from '../auth/authenticator.js';
import type { Caller } from '../auth/caller.js';
import type { SecretSealer } from '../auth/secret-sealer.js';
import type { Logger } from '../domain/logger.js';
import type { Catalog } from '../store/catalog.js';
import type { ApiRequest } from './http-types.js';

export interface ApiSettings {
  publicUrl: string;
  billingUrl: string;
  /** Items per page of every list endpoint. */
  pageSize: number;
  monthlyEventsLimit: number;
  monthlyReadsLimit: number;
}

/** What route modules are given: they import no store or auth implementation directly. */
export interface ApiContext {
  catalog: Catalog;
  authenticator: Authenticator;
  sealer: SecretSealer;
  settings: ApiSettings;
  logger: Logger;
}

export const authenticate = (context: ApiContext, request: ApiRequest): Caller =>
  context.authenticator.authenticate({
    authorization: request.headers.authorization,
    orgId: request.headers['x-statebacked-org-id'],
    act: request.headers['x-statebacked-act'],
  });
