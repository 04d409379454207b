import type { ErrorCode } from '../../domain/errors.js';
import { type Access, pathParameterDocs, type RouteDoc, type RouteKey, routeDocs, type Tag } from './route-docs.js';
import { type JsonSchema, objectOf, ref, sharedSchemas } from './schemas.js';

/** A route as the router lists it. */
interface RouteListing {
  method: string;
  pattern: string;
}

/** Captures the router itself answers 404 for when they cannot be such a name (router.ts NAMES). */
const NAME_CAPTURES = new Set(['machine', 'instance', 'index', 'keyId']);

const HAS_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** What the first line of an undescribed route's operation says; test/openapi.test.ts looks for none. */
export const UNDESCRIBED = 'undescribed route';

const tagDescriptions: Record<Tag, string> = {
  health: 'Readiness.',
  operator: "The node's own views, for the operator credential (not in the State Backed API).",
  orgs: 'Organisations.',
  keys: 'Signing keys: a key signs HS256 tokens for its org with its scopes.',
  billing: 'Billing links (a self-hosted node bills nothing).',
  machines: 'Machine definitions.',
  'machine versions': 'Versions of a machine: provisional creation, code upload, finalization.',
  migrations: 'Migrations between versions, and instance upgrades.',
  instances: 'Machine instances: durable actors.',
  indexes: 'Index queries over instances.',
  logs: "Machine code's console output.",
  'token exchange': 'Identity providers, token providers, and exchanging their tokens for State Backed tokens.',
  usage: 'Counted transitions and reads.',
  'http apis': "Machines' own HTTP endpoints.",
  realtime: 'Live instance updates over a websocket.',
  console: 'The web console served by every node (not in the State Backed API).',
  meta: 'About the API itself.',
};

/** Status → the codes answered with it, merged. */
type ErrorsByStatus = Map<number, Set<ErrorCode>>;

const addErrors = (into: ErrorsByStatus, errors: Record<number, readonly ErrorCode[]>): void => {
  for (const [status, codes] of Object.entries(errors)) {
    const set = into.get(Number(status)) ?? new Set<ErrorCode>();
    for (const code of codes) set.add(code);
    into.set(Number(status), set);
  }
};

/**
 * The errors a route can answer: its own, and those the server, the router and authentication give
 * every route of its kind (http-server.ts, router.ts, authenticator.ts).
 */
const errorsOf = (method: string, captures: string[], doc: RouteDoc | undefined): ErrorsByStatus => {
  const errors: ErrorsByStatus = new Map();
  // Any request: a bug (500), a draining node or an unavailable store (503).
  addErrors(errors, { 500: ['internal'], 503: ['unavailable'] });
  if (HAS_BODY.has(method)) addErrors(errors, { 400: ['invalid-parameter'], 413: ['payload-too-large'] });
  if (captures.some((name) => NAME_CAPTURES.has(name))) addErrors(errors, { 404: ['not-found'] });
  const access: Access = doc?.access ?? 'credential';
  if (access !== 'public') {
    // A missing or bad credential, a credential header given twice, an org that is not the caller's or
    // not named where several exist.
    addErrors(errors, { 400: ['invalid-parameter', 'specify-org'], 403: ['unauthorized', 'missing-org'] });
  }
  if (access === 'operator') addErrors(errors, { 403: ['missing-user'] });
  if (typeof access === 'object' || doc?.actAs) addErrors(errors, { 403: ['missing-scope'] });
  if (doc?.errors) addErrors(errors, doc.errors);
  return errors;
};

/** The answer for one error status; an OAuth route answers its own refusals the OAuth way, and the server's (a draining node, a bug) the API's. */
const errorResponse = (codes: Set<ErrorCode>, oauth: boolean): unknown => {
  const list = [...codes].sort();
  const apiError: JsonSchema = { allOf: [ref('Error'), objectOf({ code: { type: 'string', enum: list } })] };
  return {
    description: list.join(', '),
    content: { 'application/json': { schema: oauth ? { anyOf: [ref('OAuthError'), apiError] } : apiError } },
  };
};

const requestBody = (body: RouteDoc['body']): unknown => {
  if (body === undefined) return undefined;
  const { contentType, schema } =
    typeof body.contentType === 'string' && 'schema' in body
      ? (body as { contentType: string; schema: JsonSchema })
      : { contentType: 'application/json', schema: body };
  return { required: true, content: { [contentType]: { schema } } };
};

const securityOf = (access: Access): unknown[] => (access === 'public' ? [] : [{ bearer: [] }]);

const accessText = (access: Access): string =>
  access === 'public'
    ? 'No credential.'
    : access === 'operator'
      ? 'The operator credential only.'
      : access === 'credential'
        ? 'Any credential.'
        : `A key token with scope ${access.scopes.join(' or ')}, or the operator credential.`;

const operationOf = (route: RouteListing, captures: string[]): Record<string, unknown> => {
  const key = `${route.method} ${route.pattern}` as RouteKey;
  const doc = routeDocs[key];
  const parameters: unknown[] = captures.map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: pathParameterDocs[name]?.schema ?? { type: 'string' },
    ...(pathParameterDocs[name] ? { description: pathParameterDocs[name].description } : {}),
  }));
  for (const [name, query] of Object.entries(doc?.query ?? {})) {
    parameters.push({ name, in: 'query', required: query.required ?? false, schema: query.schema, description: query.description });
  }
  const access = doc?.access ?? 'credential';
  if (access !== 'public') parameters.push({ $ref: '#/components/parameters/OrgId' });
  if (doc?.actAs) parameters.push({ $ref: '#/components/parameters/ActAs' });

  const responses: Record<string, unknown> = {};
  if (doc) {
    const { status, description, schema, contentType } = doc.ok;
    responses[String(status)] = {
      description,
      ...(schema === undefined ? {} : { content: { [contentType ?? 'application/json']: { schema } } }),
    };
  } else {
    responses.default = { description: UNDESCRIBED };
  }
  for (const [status, codes] of [...errorsOf(route.method, captures, doc)].sort(([a], [b]) => a - b)) {
    responses[String(status)] = errorResponse(codes, doc?.oauthErrors === true);
  }
  const body = requestBody(doc?.body);
  return {
    operationId: operationId(route),
    summary: doc?.summary ?? UNDESCRIBED,
    ...(doc ? { description: [doc.description, accessText(access)].filter(Boolean).join(' ') } : {}),
    ...(doc ? { tags: [doc.tag] } : {}),
    security: securityOf(access),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body === undefined ? {} : { requestBody: body }),
    responses,
  };
};

/** Unique and stable: `get_machines_machine_i_instance`. */
const operationId = (route: RouteListing): string =>
  [
    route.method.toLowerCase(),
    ...route.pattern
      .split('/')
      .filter(Boolean)
      .map((s) => s.replace(/^:/, '').replace(/[^A-Za-z0-9]+/g, '_')),
  ].join('_');

/** `GET /rt` is bound on the server beside the router (realtime/rt-websocket.ts): described here by hand. */
const realtimePath = {
  get: {
    operationId: 'get_rt',
    summary: 'Open a realtime websocket',
    description:
      'A websocket upgrade (RFC 6455), always accepted: the token is checked per subscription and problems are answered in-band as `{type: "error", requestId, status, code}` frames. Frames are JSON text: subscribe-to-instance, unsubscribe-from-instance and ping in; instance-update and error out (docs/realtime.md, wire-protocol §6).',
    tags: ['realtime'],
    security: [],
    parameters: [
      { name: 'token', in: 'query', required: true, schema: { type: 'string' }, description: 'The bearer token, as in Authorization.' },
      { name: 'x-statebacked-org-id', in: 'query', required: false, schema: ref('OrgId'), description: 'The org, as in the header.' },
      { name: 'Upgrade', in: 'header', required: true, schema: { const: 'websocket' } },
    ],
    responses: {
      '101': { description: 'Switched to the websocket protocol.' },
    },
  },
};

/**
 * The OpenAPI 3.1 document of the routes the router lists, described by route-docs.ts, and of `/rt`.
 * Built from the router's own list, so a route cannot be missing from it; one without a description
 * appears as an undescribed operation (and fails test/openapi.test.ts).
 */
export const openApiDocument = (routes: RouteListing[], publicUrl: string): Record<string, unknown> => {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const captures = route.pattern
      .split('/')
      .filter((segment) => segment.startsWith(':'))
      .map((segment) => segment.slice(1));
    const path = route.pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operationOf(route, captures);
  }
  paths['/rt'] = realtimePath;
  return {
    openapi: '3.1.0',
    info: {
      title: 'Statehold',
      version: '0.1.0',
      summary: 'Runs XState machines as durable actors behind the State Backed API.',
      description:
        'Errors are `{error, code, parameter?}` (POST /tokens: the OAuth shape). Authentication failures are 403, never 401. Every GET also answers HEAD; every path answers OPTIONS as a CORS preflight (204); another method on a known path is 405 invalid-parameter with an Allow header.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: publicUrl }],
    tags: Object.entries(tagDescriptions).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      schemas: sharedSchemas,
      parameters: {
        OrgId: {
          name: 'x-statebacked-org-id',
          in: 'header',
          required: false,
          schema: ref('OrgId'),
          description:
            "The org to act in. A key token's org is its key's; the operator names one when several exist (or gets 400 specify-org).",
        },
        ActAs: {
          name: 'x-statebacked-act',
          in: 'header',
          required: false,
          schema: { type: 'string' },
          description: 'JSON object: the auth context to act as (needs org.keys.write; wire-protocol §2.5).',
        },
      },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            "A key-signed token: HS256 JWT with the key id (sbk_...) as kid, aud https://api.statebacked.dev/ (or this node's public URL), act the end user's claims, signed with the key's secret (as @statebacked/token makes). Or the operator credential as it is.",
        },
      },
    },
  };
};
