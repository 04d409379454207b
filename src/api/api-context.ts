import type { Authenticator } from '../auth/authenticator.js';
import { type Caller, requireScope } from '../auth/caller.js';
import { invalidParameter, notFound } from '../domain/errors.js';
import { isPrettyId } from '../domain/ids.js';
import { clipped } from '../domain/names.js';
import type { MachineDefinition } from '../domain/machine-definition.js';
import type { MachineRecord } from '../domain/records.js';
import type { Scope } from '../domain/scopes.js';
import type { SecretSealer } from '../auth/secret-sealer.js';
import type { TokenExchange } from '../auth/token-exchange.js';
import type { UploadSigner } from '../auth/upload-signer.js';
import type { Logger } from '../domain/logger.js';
import type { HttpApiRunner } from '../runtime/http-api-runner.js';
import type { InstanceRuntime } from '../runtime/instance-runtime.js';
import type { InstanceWrites } from '../runtime/instance-writes.js';
import type { InstanceReads } from '../store/instance-reads.js';
import type { LogStore } from '../store/log-store.js';
import type { Catalog } from '../store/catalog.js';
import type { VersionStore } from '../store/version-store.js';
import type { ApiRequest } from './http-types.js';

export interface ApiSettings {
  publicUrl: string;
  /** Whether the operator set the public URL (--public-url): else the code upload URL follows the request's Host. */
  publicUrlSet: boolean;
  /** The link GET /billing returns (--billing-url); undefined: this node's own page, under the request's base (request-base.ts). */
  billingUrl: string | undefined;
  /** Items per page of every list endpoint. */
  pageSize: number;
  monthlyEventsLimit: number;
  monthlyReadsLimit: number;
  /** POST /tokens rates, per node (--token-exchanges-per-second, --token-exchanges-per-address). */
  tokenExchangesPerSecond: number;
  tokenExchangesPerAddress: number;
}

/** Checks an uploaded machine version bundle (the sandbox's `validateBundle`, injected by the composition root). */
export type BundleValidator = (code: string) => Promise<{ ok: true } | { ok: false; error: string }>;

/** What route modules are given: they import no store or auth implementation directly. */
export interface ApiContext {
  catalog: Catalog;
  authenticator: Authenticator;
  sealer: SecretSealer;
  versions: VersionStore;
  /** Instance reads with read-your-writes, from the owners (the node's own store on the embedded node). */
  reads: InstanceReads;
  logs: LogStore;
  runtime: InstanceRuntime;
  /** Instance writes and authorized reads, run by the instance's owner (the runtime itself on the embedded node). */
  writes: InstanceWrites;
  /** Requests to machines' http APIs (wire-protocol §3.14). */
  httpApis: HttpApiRunner;
  uploadSigner: UploadSigner;
  /** POST /tokens: identity providers' tokens in, State Backed tokens out. */
  tokenExchange: TokenExchange;
  validateBundle: BundleValidator;
  /** A version's states and transitions, read from its isolate (loading it when it is not). */
  machineDefinition: (orgId: string, machine: string, versionId: string) => Promise<MachineDefinition>;
  /** Checks an uploaded migration bundle (the sandbox's `validateMigrationBundle`). */
  validateMigrationBundle: BundleValidator;
  settings: ApiSettings;
  logger: Logger;
  /** On a cluster node: its health and its view of the cluster (GET /health, GET /cluster). */
  cluster?: {
    health(): { ready: boolean; reason?: string; nodeId: string; members: number; nats: string };
    status(instance?: { orgId: string; machine: string; name: string }): unknown;
  };
  /** Why the node's storage refuses writes (a failed commit, until a restart); undefined while it takes them. GET /health answers 503 then. */
  storageRefusal?: () => Error | undefined;
  /** GET /metrics: the node's metrics as text, and whether they need no credential (--metrics-public). */
  metrics?: { public: boolean; contentType: string; text(): Promise<string> };
  /** The realtime endpoint's counts, for GET /stats (set once the server listens). */
  realtimeStats?: () => { sockets: number; upgrades: number; subscribedInstances: number };
}

/** The caller a request's headers name (wire-protocol §2); a 403 when they name none that verifies. */
export const callerOf = (authenticator: Authenticator, headers: Readonly<Record<string, string | undefined>>): Caller =>
  authenticator.authenticate({
    authorization: headers.authorization,
    orgId: headers['x-statebacked-org-id'],
    act: headers['x-statebacked-act'],
  });

export const authenticate = (context: ApiContext, request: ApiRequest): Caller => callerOf(context.authenticator, request.headers);

/** The usual opening of an org-scoped route: verify the credential, check a scope, settle the org. */
export const callerInOrg = (context: ApiContext, request: ApiRequest, ...anyOf: Scope[]): { caller: Caller; orgId: string } => {
  const caller = authenticate(context, request);
  requireScope(caller, ...anyOf);
  return { caller, orgId: context.authenticator.resolveOrg(caller) };
};

export const requireMachine = (context: ApiContext, orgId: string, slug: string): MachineRecord => {
  const machine = context.catalog.getMachine(orgId, slug);
  if (!machine) throw notFound(`machine ${slug} does not exist`);
  return machine;
};

/**
 * A version id the request body names (`targetMachineVersionId`, `fromMachineVersionId`, ...): required,
 * a string, and a version of this machine. An unknown one is a 400 naming the parameter, not a 404:
 * the resource the path names exists; one of the request's parameters is wrong.
 */
export const requireVersionParameter = (
  context: ApiContext,
  orgId: string,
  machine: MachineRecord,
  value: unknown,
  parameter: string,
): string => {
  if (value === undefined || value === null) throw invalidParameter(parameter, `${parameter} is required`);
  if (typeof value !== 'string') throw invalidParameter(parameter, `${parameter} must be a string (a ver_ id)`);
  if (!isPrettyId(value, 'ver') || !context.versions.getVersion(orgId, machine.slug, value)) {
    throw invalidParameter(parameter, `machine ${machine.slug} has no version ${clipped(value)} (${parameter})`);
  }
  return value;
};
