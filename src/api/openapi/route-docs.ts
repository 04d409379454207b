import type { ErrorCode } from '../../domain/errors.js';
import type { Scope } from '../../domain/scopes.js';
import { dateTime, type JsonSchema, objectOf, pageOf, ref, SLUG_PATTERN } from './schemas.js';

/** `METHOD pattern`, exactly as the route is added to the router (`GET /machines/:machine`). */
export type RouteKey = `${Uppercase<string>} /${string}`;

export type Tag =
  | 'health'
  | 'operator'
  | 'orgs'
  | 'keys'
  | 'billing'
  | 'machines'
  | 'machine versions'
  | 'migrations'
  | 'instances'
  | 'indexes'
  | 'logs'
  | 'token exchange'
  | 'usage'
  | 'http apis'
  | 'realtime'
  | 'console'
  | 'meta';

/**
 * Who may call a route: a key token with one of the scopes (or the operator); the operator credential
 * alone (a key token gets 403 missing-user); any credential (the route checks scopes itself); or anyone.
 */
export type Access = { scopes: Scope[] } | 'operator' | 'credential' | 'public';

interface QueryDoc {
  schema: JsonSchema;
  description: string;
  required?: boolean;
}

/** One route as the OpenAPI document describes it. The errors every route (or kind of route) can get are added by openapi-document.ts. */
export interface RouteDoc {
  summary: string;
  tag: Tag;
  description?: string;
  access: Access;
  query?: Record<string, QueryDoc>;
  /** The request body: a JSON schema (application/json), or another content type with its schema. */
  body?: JsonSchema | { contentType: string; schema: JsonSchema };
  /** The success answer; no schema for 201/204 (no body, wire-protocol §1.3). */
  ok: { status: number; description: string; schema?: JsonSchema; contentType?: string };
  /** The errors the route itself answers, by status. */
  errors?: Record<number, ErrorCode[]>;
  /** Errors come in the OAuth shape (POST /tokens). */
  oauthErrors?: boolean;
  /** Takes `x-statebacked-act` (impersonation, wire-protocol §2.5). */
  actAs?: boolean;
}

/** Path captures, by name: what they hold. */
export const pathParameterDocs: Record<string, { schema: JsonSchema; description: string }> = {
  machine: { schema: ref('Slug'), description: 'The machine name.' },
  instance: { schema: ref('Slug'), description: 'The instance name.' },
  index: { schema: ref('Slug'), description: 'An index the machine declares.' },
  keyId: { schema: ref('KeyId'), description: 'The key id (sbk_...).' },
  orgId: { schema: { type: 'string' }, description: 'The org id (org_...).' },
  service: { schema: { type: 'string' }, description: 'The token provider service name.' },
  signedMachineVersionId: { schema: { type: 'string' }, description: 'The signed id the provisional creation returned.' },
  signedMigrationId: { schema: { type: 'string' }, description: 'The signed id the provisional creation returned.' },
  httpApi: { schema: { type: 'string' }, description: "The http API's slug in the version's httpApiMapper." },
  version: { schema: { type: 'string' }, description: 'The machine version id.' },
  file: { schema: { type: 'string' }, description: "A file of the console's build." },
};

const cursorQuery: Record<string, QueryDoc> = { cursor: { schema: ref('Cursor'), description: 'From the previous page.' } };
const gzipQuery: Record<string, QueryDoc> = {
  gzip: { schema: { type: 'string', enum: ['', 'true', '1', 'false', '0'] }, description: 'The code will be uploaded gzipped (`?gzip`).' },
};
const indexNames: JsonSchema = { type: 'array', items: { type: 'string', pattern: SLUG_PATTERN } };
const versionFinalization: JsonSchema = objectOf({ machineVersionId: ref('MachineVersionId') }, ['machineVersionId']);
const instanceListing: JsonSchema = objectOf(
  { slug: ref('Slug'), createdAt: dateTime, status: { enum: ['running', 'paused'] }, machineVersion: ref('MachineVersionInfo') },
  ['slug', 'createdAt', 'status', 'machineVersion'],
);
const identityProvider: JsonSchema = objectOf(
  {
    aud: { type: 'string' },
    iss: { type: 'string' },
    algs: { type: 'array', items: ref('SigningAlgorithm') },
    jwksUrl: { type: 'string' },
    mapping: ref('Mapping'),
  },
  ['algs', 'mapping'],
);
/** The instance errors that running machine code can bring (wire-protocol §8). */
const machineCodeErrors = {
  400: ['invalid-parameter', 'machine-code-error', 'context-too-large', 'state-too-large', 'no-migration-path'],
  403: ['rejected-by-machine-authorizer'],
} satisfies Record<number, ErrorCode[]>;

/** An http API route (wire-protocol §3.14): one per method and spelling, all alike. */
const httpApiDoc = (method: string): RouteDoc => ({
  summary: `${method} to a machine's http API`,
  tag: 'http apis',
  description:
    "No State Backed credential: the version's httpApiMapper handler authenticates the raw request and turns it into an event; its answer is the handler's (docs/http-apis.md). /http-apis/ is the same as /http-api/.",
  access: 'public',
  ...(method === 'GET' || method === 'HEAD' ? {} : { body: { contentType: '*/*', schema: {} } }),
  ok: { status: 200, description: "The handler's answer: any status, headers and body it chose.", contentType: '*/*', schema: {} },
  errors: { 400: ['invalid-parameter', 'machine-code-error'], 404: ['not-found'], 413: ['payload-too-large'], 429: ['rate-limited'] },
});

const httpApiDocs = Object.fromEntries(
  ['http-api', 'http-apis'].flatMap((prefix) =>
    ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'].map((method) => [
      `${method} /${prefix}/:orgId/machines/:machine/:httpApi`,
      httpApiDoc(method),
    ]),
  ),
) as Record<RouteKey, RouteDoc>;

/**
 * Every route's description, keyed as it is added to the router: a route added without an entry here
 * fails test/openapi.test.ts. Adding one is adding one entry.
 */
export const routeDocs: Record<RouteKey, RouteDoc> = {
  'GET /health': {
    summary: 'Whether the node can serve',
    tag: 'health',
    description: 'A cluster node also says what it sees of NATS and its cluster, and answers 503 while it cannot serve.',
    access: 'public',
    ok: { status: 200, description: 'Ready.', schema: objectOf({ status: { const: 'ok' }, cluster: { type: 'object' } }, ['status']) },
  },
  'GET /openapi.json': {
    summary: 'This document',
    tag: 'meta',
    access: 'public',
    ok: { status: 200, description: 'The OpenAPI 3.1 description of the API.', schema: { type: 'object' } },
  },
  'GET /console': {
    summary: 'The web console (a Statehold addition)',
    tag: 'console',
    access: 'public',
    ok: { status: 200, description: "The console's page.", contentType: 'text/html', schema: { type: 'string' } },
  },
  'GET /console/:file': {
    summary: "The web console's assets",
    tag: 'console',
    access: 'public',
    ok: {
      status: 200,
      description: 'A script, a style sheet or the page.',
      contentType: 'application/octet-stream',
      schema: { type: 'string' },
    },
    errors: { 404: ['not-found'] },
  },
  'GET /cluster': {
    summary: "A cluster node's view of its cluster",
    tag: 'operator',
    description: 'Members and their states, the partitions this node holds; with ?instance, which node owns it. 404 on an embedded node.',
    access: 'operator',
    query: { instance: { schema: { type: 'string' }, description: '<org id>/<machine>/<instance name>: report its owner.' } },
    ok: { status: 200, description: "The node's view.", schema: { type: 'object' } },
    errors: { 400: ['invalid-parameter'], 404: ['not-found'] },
  },
  'GET /metrics': {
    summary: "The node's metrics in Prometheus's text format (a Statehold addition)",
    tag: 'operator',
    description:
      'Requests by route and status, events committed, commit and sandbox-call latency, actors, timers, outbox, websockets, storage sizes; on a cluster node, NATS, forwarded requests and ownership moves. Public when the node runs with --metrics-public.',
    access: 'operator',
    ok: { status: 200, description: 'The metrics.', contentType: 'text/plain', schema: { type: 'string' } },
  },
  'GET /stats': {
    summary: "The node's memory, actors, sandbox workers and realtime sockets",
    tag: 'operator',
    access: 'operator',
    ok: { status: 200, description: 'What the node holds.', schema: { type: 'object' } },
  },
  'GET /orgs': {
    summary: 'List orgs',
    tag: 'orgs',
    description: 'The operator sees every org; a key token (org.read) its own.',
    access: { scopes: ['org.read'] },
    query: cursorQuery,
    ok: { status: 200, description: 'A page of orgs.', schema: pageOf('orgs', ref('Org')) },
    errors: { 400: ['invalid-parameter'] },
  },
  'POST /orgs': {
    summary: 'Create an org',
    tag: 'orgs',
    access: 'operator',
    body: objectOf({ name: { type: 'string', minLength: 1, maxLength: 256 }, allowAnonymousAccess: { type: 'boolean', default: true } }, [
      'name',
    ]),
    ok: { status: 200, description: 'The new org.', schema: objectOf({ id: ref('OrgId') }, ['id']) },
    errors: { 400: ['invalid-parameter'] },
  },
  'PATCH /orgs/:orgId': {
    summary: "Switch an org's anonymous access on or off",
    tag: 'orgs',
    access: { scopes: ['org.write'] },
    body: objectOf({ allowAnonymousAccess: { type: 'boolean' } }, ['allowAnonymousAccess']),
    ok: { status: 200, description: 'The org.', schema: ref('Org') },
    errors: { 400: ['invalid-parameter'], 403: ['missing-org'] },
  },
  'GET /keys': {
    summary: 'List keys',
    tag: 'keys',
    access: { scopes: ['tokens.admin'] },
    query: cursorQuery,
    ok: {
      status: 200,
      description: 'A page of keys, without their secrets.',
      schema: pageOf(
        'keys',
        objectOf({ id: ref('KeyId'), name: { type: 'string' }, scopes: { type: 'array', items: ref('Scope') }, createdAt: dateTime }, [
          'id',
          'name',
          'scopes',
          'createdAt',
        ]),
      ),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'POST /keys': {
    summary: 'Create a key',
    tag: 'keys',
    description: 'Its secret is answered this once. Explicit scopes win over `use`.',
    access: { scopes: ['org.keys.write'] },
    body: objectOf(
      { name: { type: 'string' }, scopes: { type: 'array', items: ref('Scope') }, use: { type: 'string', enum: ['production', 'ci'] } },
      ['name'],
    ),
    ok: {
      status: 200,
      description: 'The key id and its secret (sign tokens with it, HS256).',
      schema: objectOf({ id: ref('KeyId'), key: { type: 'string' } }, ['id', 'key']),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'DELETE /keys/:keyId': {
    summary: 'Delete a key',
    tag: 'keys',
    description: "The key's tokens stop working at once.",
    access: { scopes: ['org.keys.write'] },
    ok: { status: 204, description: 'Deleted.' },
    errors: { 404: ['not-found'] },
  },
  'GET /idps': {
    summary: 'List identity providers',
    tag: 'token exchange',
    access: { scopes: ['tokens.admin'] },
    query: cursorQuery,
    ok: { status: 200, description: 'A page of identity providers (keys are never returned).', schema: pageOf('idps', identityProvider) },
    errors: { 400: ['invalid-parameter'] },
  },
  'POST /idps': {
    summary: 'Create or replace an identity provider',
    tag: 'token exchange',
    description: '(aud, iss) identifies it; give exactly one of key (base64url) and jwksUrl.',
    access: { scopes: ['tokens.admin'] },
    body: objectOf(
      {
        aud: { type: 'string' },
        iss: { type: 'string' },
        key: { type: 'string' },
        jwksUrl: { type: 'string', format: 'uri' },
        algs: { type: 'array', items: ref('SigningAlgorithm'), minItems: 1 },
        mapping: ref('Mapping'),
      },
      ['algs', 'mapping'],
    ),
    ok: { status: 204, description: 'Stored.' },
    errors: { 400: ['invalid-parameter'], 409: ['invalid-state'] },
  },
  'DELETE /idps': {
    summary: 'Delete an identity provider',
    tag: 'token exchange',
    access: { scopes: ['tokens.admin'] },
    body: objectOf({ aud: { type: 'string' }, iss: { type: 'string' } }),
    ok: { status: 204, description: 'Deleted.' },
    errors: { 400: ['invalid-parameter'], 404: ['not-found'] },
  },
  'GET /token-providers': {
    summary: 'List token providers',
    tag: 'token exchange',
    access: { scopes: ['tokens.admin'] },
    query: cursorQuery,
    ok: {
      status: 200,
      description: 'A page of token providers.',
      schema: pageOf(
        'tokenProviders',
        objectOf({ service: ref('Slug'), keyId: ref('KeyId'), mapping: ref('Mapping') }, ['service', 'keyId', 'mapping']),
      ),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'POST /token-providers': {
    summary: 'Create or replace a token provider',
    tag: 'token exchange',
    access: { scopes: ['tokens.admin'] },
    body: objectOf({ service: ref('Slug'), keyId: ref('KeyId'), mapping: ref('Mapping') }, ['service', 'keyId', 'mapping']),
    ok: { status: 204, description: 'Stored.' },
    errors: { 400: ['invalid-parameter'], 409: ['invalid-state'] },
  },
  'DELETE /token-providers/:service': {
    summary: 'Delete a token provider',
    tag: 'token exchange',
    access: { scopes: ['tokens.admin'] },
    ok: { status: 204, description: 'Deleted.' },
    errors: { 404: ['not-found'] },
  },
  'POST /tokens': {
    summary: "Exchange an identity provider's token for a State Backed token",
    tag: 'token exchange',
    description: 'RFC 8693 token exchange; no credential (the subject token is one). Rate-limited per client address and per org.',
    access: 'public',
    body: {
      contentType: 'application/x-www-form-urlencoded',
      schema: objectOf(
        {
          grant_type: { const: 'urn:ietf:params:oauth:grant-type:token-exchange' },
          audience: { type: 'string', description: 'https://tokens.statebacked.dev/<orgId>/<service>' },
          subject_token: { type: 'string' },
          subject_token_type: { type: 'string' },
          requested_token_type: { const: 'urn:ietf:params:oauth:token-type:access_token' },
        },
        ['grant_type', 'audience', 'subject_token'],
      ),
    },
    ok: {
      status: 200,
      description: 'The minted token.',
      schema: objectOf(
        {
          access_token: { type: 'string' },
          issued_token_type: { type: 'string' },
          token_type: { const: 'Bearer' },
          expires_in: { type: 'number' },
        },
        ['access_token', 'issued_token_type', 'token_type'],
      ),
    },
    oauthErrors: true,
    errors: { 400: ['invalid-parameter'], 403: ['unauthorized'], 429: ['rate-limited'], 503: ['unavailable'] },
  },
  'GET /billing': {
    summary: 'A link to the billing portal',
    tag: 'billing',
    access: { scopes: ['org.write'] },
    ok: { status: 200, description: 'The link.', schema: objectOf({ url: { type: 'string' } }, ['url']) },
  },
  'GET /billing-portal': {
    summary: 'The default billing page (there is nothing to pay)',
    tag: 'billing',
    access: 'public',
    ok: { status: 200, description: 'A short HTML page.', contentType: 'text/html', schema: { type: 'string' } },
  },
  'GET /machines': {
    summary: 'List machines',
    tag: 'machines',
    access: { scopes: ['machines.read'] },
    query: cursorQuery,
    ok: {
      status: 200,
      description: 'A page of machines.',
      schema: pageOf(
        'machines',
        objectOf({ slug: ref('Slug'), createdAt: dateTime, currentVersion: ref('MachineVersionInfo') }, ['slug', 'createdAt']),
      ),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'POST /machines': {
    summary: 'Create a machine',
    tag: 'machines',
    access: { scopes: ['machines.write'] },
    body: objectOf({ slug: ref('Slug'), indexes: indexNames }, ['slug']),
    ok: { status: 201, description: 'Created.' },
    errors: { 400: ['invalid-parameter'], 409: ['invalid-state'] },
  },
  'GET /machines/:machine': {
    summary: 'Read a machine',
    tag: 'machines',
    access: { scopes: ['machines.read'] },
    ok: {
      status: 200,
      description: 'The machine.',
      schema: objectOf(
        {
          machine: objectOf({ createdAt: dateTime, currentVersion: ref('MachineVersionInfo'), indexes: indexNames }, [
            'createdAt',
            'indexes',
          ]),
        },
        ['machine'],
      ),
    },
  },
  'DELETE /machines/:machine': {
    summary: 'Delete a machine, its versions and its code',
    tag: 'machines',
    description: 'Only once it has no instances left.',
    access: { scopes: ['machines.admin'] },
    body: {
      allOf: [
        ref('DeletionConfirmation'),
        objectOf({ hmacSha256OfMachineNameWithMachineNameKey: { type: 'string' } }, ['hmacSha256OfMachineNameWithMachineNameKey']),
      ],
    },
    ok: { status: 204, description: 'Deleted.' },
    errors: { 400: ['invalid-parameter'], 409: ['invalid-state'] },
  },
  'GET /machines/:machine/v': {
    summary: "List a machine's versions",
    tag: 'machine versions',
    access: { scopes: ['machine-versions.read'] },
    query: cursorQuery,
    ok: { status: 200, description: 'A page of versions.', schema: pageOf('versions', ref('MachineVersionInfo')) },
    errors: { 400: ['invalid-parameter'] },
  },
  'GET /machines/:machine/v/:version/definition': {
    summary: "A version's statechart: its states, initial states, tags and transitions (a Statehold addition)",
    tag: 'machine versions',
    description: "Read from the version's isolate, as plain data (no code); bounded in size. The console draws it.",
    access: { scopes: ['machine-versions.read'] },
    ok: { status: 200, description: 'The definition.', schema: { type: 'object' } },
    errors: { 404: ['not-found'] },
  },
  'POST /machines/:machine/v': {
    summary: 'Create a version provisionally',
    tag: 'machine versions',
    description: 'Then POST the code to codeUploadUrl, then finalize with PUT /machines/{machine}/v/{signedMachineVersionId}.',
    access: { scopes: ['machine-versions.write'] },
    query: gzipQuery,
    ok: { status: 200, description: 'Where to upload the code, and the signed id.', schema: ref('ProvisionalCreation') },
    errors: { 400: ['invalid-parameter'] },
  },
  'PUT /machines/:machine/v/:signedMachineVersionId': {
    summary: 'Finalize a version',
    tag: 'machine versions',
    description:
      "Checks the uploaded code. A machine's first version becomes current without makeCurrent. Finalizing again answers the same id.",
    access: { scopes: ['machine-versions.write'] },
    body: objectOf({
      clientInfo: { type: 'string', maxLength: 4096 },
      makeCurrent: { type: 'boolean' },
      indexSelectors: { type: 'object', additionalProperties: { type: 'string' } },
    }),
    ok: { status: 200, description: 'The version id.', schema: versionFinalization },
    errors: { 400: ['invalid-parameter'], 403: ['unauthorized'], 404: ['not-found'] },
  },
  'POST /machines/:machine/migrations': {
    summary: 'Create a migration between two versions provisionally',
    tag: 'migrations',
    access: { scopes: ['machine-versions.write'] },
    query: gzipQuery,
    body: objectOf({ fromMachineVersionId: ref('MachineVersionId'), toMachineVersionId: ref('MachineVersionId') }, [
      'fromMachineVersionId',
      'toMachineVersionId',
    ]),
    ok: { status: 200, description: 'Where to upload the code, and the signed id.', schema: ref('ProvisionalCreation') },
    errors: { 400: ['invalid-parameter'], 404: ['not-found'] },
  },
  'PUT /machines/:machine/migrations/:signedMigrationId': {
    summary: 'Finalize a migration',
    tag: 'migrations',
    access: { scopes: ['machine-versions.write'] },
    ok: {
      status: 200,
      description: 'The migration id (under both names clients read).',
      schema: objectOf({ machineVersionMigrationId: { type: 'string' }, machineVersionId: { type: 'string' } }, [
        'machineVersionMigrationId',
      ]),
    },
    errors: { 400: ['invalid-parameter'], 403: ['unauthorized'], 404: ['not-found'] },
  },
  'POST /uploads/code': {
    summary: "Upload a provisional version's or migration's code",
    tag: 'machine versions',
    description: 'The codeUploadUrl. No credential: the signed token field is the authority.',
    access: 'public',
    body: {
      contentType: 'multipart/form-data',
      schema: objectOf(
        {
          token: { type: 'string' },
          'content-encoding': { enum: ['gzip', 'identity'] },
          file: { type: 'string', contentMediaType: 'application/octet-stream' },
        },
        ['token', 'file'],
      ),
    },
    ok: { status: 204, description: 'Kept until finalization.' },
    errors: { 400: ['invalid-parameter'], 403: ['unauthorized'], 404: ['not-found'], 413: ['payload-too-large'] },
  },
  'POST /machines/:machine': {
    summary: 'Create an instance',
    tag: 'instances',
    description:
      "Runs the machine's allowWrite, then its initial state to settling; of the current version unless machineVersionId names one.",
    access: { scopes: ['instances.write'] },
    actAs: true,
    body: objectOf({ slug: ref('Slug'), context: { type: 'object' }, machineVersionId: ref('MachineVersionId') }, ['slug']),
    ok: { status: 200, description: 'The settled state.', schema: ref('State') },
    errors: { ...machineCodeErrors, 404: ['not-found'], 409: ['invalid-state'], 413: ['payload-too-large'] },
  },
  'GET /machines/:machine/i': {
    summary: "List a machine's instances",
    tag: 'instances',
    access: { scopes: ['instances.read'] },
    query: {
      ...cursorQuery,
      prefix: { schema: { type: 'string' }, description: 'Only instances whose name starts with it (a Statehold addition).' },
    },
    ok: { status: 200, description: 'A page of instances.', schema: pageOf('instances', instanceListing) },
    errors: { 400: ['invalid-parameter'] },
  },
  'GET /machines/:machine/i/:instance': {
    summary: "Read an instance's state",
    tag: 'instances',
    description: "Checked by the machine's allowRead.",
    access: { scopes: ['state.read'] },
    actAs: true,
    ok: { status: 200, description: 'The state.', schema: ref('State') },
    errors: machineCodeErrors,
  },
  'POST /machines/:machine/i/:instance/events': {
    summary: 'Send an event to an instance',
    tag: 'instances',
    description: 'Checked by allowWrite; answered once the instance settles. A pending upgrade runs first. 409 while it is paused.',
    access: { scopes: ['instances.write', 'events.write'] },
    actAs: true,
    body: objectOf({ event: ref('Event') }, ['event']),
    ok: { status: 200, description: 'The settled state.', schema: ref('State') },
    errors: { ...machineCodeErrors, 409: ['invalid-state'], 413: ['payload-too-large'] },
  },
  'GET /machines/:machine/i/:instance/events': {
    summary: "An instance's transitions, oldest first",
    tag: 'instances',
    access: { scopes: ['instances.admin'] },
    query: cursorQuery,
    ok: {
      status: 200,
      description: 'A page of transitions.',
      schema: pageOf(
        'transitions',
        objectOf({ createdAt: dateTime, state: ref('StateValue'), event: { type: 'object' } }, ['createdAt', 'state', 'event']),
      ),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'GET /machines/:machine/i/:instance/admin': {
    summary: "An instance's whole state, for administrators",
    tag: 'instances',
    access: { scopes: ['instances.admin'] },
    ok: {
      status: 200,
      description: 'Its full context, status and versions.',
      schema: objectOf(
        {
          state: ref('StateValue'),
          context: { type: 'object' },
          status: { enum: ['running', 'paused'] },
          tags: { type: 'array', items: { type: 'string' } },
          done: { type: 'boolean' },
          machineVersion: ref('MachineVersionInfo'),
          desiredMachineVersion: ref('MachineVersionInfo'),
          createdAt: dateTime,
        },
        ['state', 'context', 'status', 'tags', 'done', 'machineVersion', 'createdAt'],
      ),
    },
  },
  'PUT /machines/:machine/i/:instance/v': {
    summary: "Set an instance's desired version",
    tag: 'migrations',
    description: 'The upgrade runs with its next event, through a chain of migrations.',
    access: { scopes: ['instances.write'] },
    body: objectOf({ targetMachineVersionId: ref('MachineVersionId') }, ['targetMachineVersionId']),
    ok: { status: 201, description: 'Recorded.' },
    errors: { 400: ['invalid-parameter', 'no-migration-path'] },
  },
  'PUT /machines/:machine/i/:instance/status': {
    summary: 'Pause or resume an instance',
    tag: 'instances',
    access: { scopes: ['instances.admin'] },
    body: objectOf({ status: { enum: ['running', 'paused'] } }, ['status']),
    ok: { status: 204, description: 'Set.' },
    errors: { 400: ['invalid-parameter'] },
  },
  'DELETE /machines/:machine/i/:instance': {
    summary: 'Delete an instance',
    tag: 'instances',
    access: { scopes: ['instances.admin'] },
    body: {
      allOf: [
        ref('DeletionConfirmation'),
        objectOf({ hmacSha256OfMachineInstanceNameWithMachineNameKey: { type: 'string' } }, [
          'hmacSha256OfMachineInstanceNameWithMachineNameKey',
        ]),
      ],
    },
    ok: { status: 204, description: 'Deleted.' },
    errors: { 400: ['invalid-parameter'] },
  },
  'GET /machines/:machine/indexes/:index/query': {
    summary: 'Query an index',
    tag: 'indexes',
    description: 'Instances in index order (value, then name); docs/indexes.md.',
    access: { scopes: ['indexes.read'] },
    query: {
      op: { schema: ref('IndexOp'), description: 'Compare with value (give both or neither).' },
      value: { schema: { type: 'string' }, description: 'The value to compare with.' },
      dir: { schema: { enum: ['asc', 'desc'] }, description: 'Order (asc by default).' },
      limit: { schema: { type: 'integer', minimum: 1 }, description: 'At most this many (the page size by default).' },
      ...cursorQuery,
    },
    ok: {
      status: 200,
      description: 'A page of instances with their index values.',
      schema: pageOf('instances', objectOf({ slug: ref('Slug'), indexValue: { type: 'string' } }, ['slug', 'indexValue'])),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'GET /logs': {
    summary: "The org's machine logs",
    tag: 'logs',
    description: 'At most 100 entries, oldest first; continue from maxTimestamp.',
    access: { scopes: ['logs.read'] },
    query: {
      from: { schema: dateTime, description: 'Inclusive.', required: true },
      to: { schema: dateTime, description: 'Exclusive (now by default).' },
      machine: { schema: { type: 'string' }, description: 'Only this machine.' },
      instance: { schema: { type: 'string' }, description: 'Only this instance.' },
      version: { schema: { type: 'string' }, description: 'Only this version.' },
    },
    ok: {
      status: 200,
      description: 'Log entries.',
      schema: objectOf(
        {
          maxTimestamp: dateTime,
          logs: {
            type: 'array',
            items: objectOf(
              {
                timestamp: dateTime,
                orgId: { type: 'string' },
                machineName: { type: 'string' },
                instanceName: { type: 'string' },
                machineVersionId: { type: 'string' },
                outputType: { enum: ['stdout', 'stderr'] },
                log: { type: 'string' },
              },
              ['timestamp', 'log'],
            ),
          },
        },
        ['maxTimestamp', 'logs'],
      ),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  'GET /usage': {
    summary: "The org's transitions and reads per month",
    tag: 'usage',
    access: { scopes: ['org.read'] },
    query: { months: { schema: { type: 'integer', minimum: 1, maximum: 120 }, description: 'How many months back (12 by default).' } },
    ok: {
      status: 200,
      description: 'Usage, newest month first, and the limits.',
      schema: objectOf({ currentMonth: { type: 'string' }, usage: { type: 'array' }, limits: { type: 'object' } }),
    },
    errors: { 400: ['invalid-parameter'] },
  },
  ...httpApiDocs,
};
