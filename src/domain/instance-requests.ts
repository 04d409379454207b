import type { JsonObject } from './machine-state.js';

/** A request to create an instance, as the API makes it and as it crosses to the instance's owner. */
export interface CreateRequest {
  orgId: string;
  machine: string;
  name: string;
  versionId: string;
  context: JsonObject;
  authContext: JsonObject;
  /** Makes the request idempotent: a create whose first record carries it answers that instance. */
  requestId?: string;
}
