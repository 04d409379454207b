import type { Authenticator } from '../auth/authenticator.js';
import type { Caller } from '../auth/caller.js';
import type { SecretSealer } from '../auth/secret-sealer.js';
import type { UploadSigner } from '../auth/upload-signer.js';
import type { Logger } from '../domain/logger.js';
import type { InstanceRuntime } from '../runtime/instance-runtime.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { Catalog } from '../store/catalog.js';
import type { VersionStore } from '../store/version-store.js';
import type { ApiRequest } from './http-types.js';

export interface ApiSettings {
  publicUrl: string;
  billingUrl: string;
  /** Items per page of every list endpoint. */
  pageSize: number;
  monthlyEventsLimit: number;
  monthlyReadsLimit: number;
}

/** Checks an uploaded machine version bundle (the sandbox's `validateBundle`, injected by the composition root). */
export type BundleValidator = (code: string) => Promise<{ ok: true } | { ok: false; error: string }>;

/** What route modules are given: they import no store or auth implementation directly. */
export interface ApiContext {
  catalog: Catalog;
  authenticator: Authenticator;
  sealer: SecretSealer;
  versions: VersionStore;
  instances: InstanceStore;
  runtime: InstanceRuntime;
  uploadSigner: UploadSigner;
  validateBundle: BundleValidator;
  settings: ApiSettings;
  logger: Logger;
}

export const authenticate = (context: ApiContext, request: ApiRequest): Caller =>
  context.authenticator.authenticate({
    authorization: request.headers.authorization,
    orgId: request.headers['x-statebacked-org-id'],
    act: request.headers['x-statebacked-act'],
  });
