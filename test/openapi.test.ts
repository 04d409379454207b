import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import type { ApiContext } from '../src/api/api-context.js';
import { openApiDocument, UNDESCRIBED } from '../src/api/openapi/openapi-document.js';
import { routeDocs } from '../src/api/openapi/route-docs.js';
import type { Router } from '../src/api/router.js';
import { buildRouter } from '../src/api/routes/index.js';
import { errorCodes } from '../src/domain/errors.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

interface Operation {
  summary: string;
  security: unknown[];
  responses: Record<string, { content?: Record<string, { schema: CodesSchema & { anyOf?: CodesSchema[] } }> }>;
}
type Document = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: { ErrorCode: { enum: string[] } } };
};

/**
 * The router as the node builds it. Adding routes reads only the settings (no handler runs here), so
 * the rest of the context is left out.
 */
const liveRouter = (): Router =>
  buildRouter({ settings: { tokenExchangesPerSecond: 1, tokenExchangesPerAddress: 1 } } as unknown as ApiContext);

const pathOf = (pattern: string) => pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** Routes of `router` the document has no described operation for. */
const undescribed = (router: Router, document: Document): string[] =>
  router
    .list()
    .filter(({ method, pattern }) => {
      const operation = document.paths[pathOf(pattern)]?.[method.toLowerCase()];
      return operation === undefined || operation.summary === UNDESCRIBED;
    })
    .map(({ method, pattern }) => `${method} ${pattern}`);

type CodesSchema = { allOf?: Array<{ properties?: { code?: { enum: string[] } } }> };

/** The error codes an operation's documented answer for `status` names (an OAuth route's: those of its API-shaped half). */
const documentedCodes = (operation: Operation | undefined, status: number): string[] => {
  const schema = operation?.responses[String(status)]?.content?.['application/json']?.schema;
  const apiShaped = schema?.anyOf?.[1] ?? schema;
  return apiShaped?.allOf?.[1]?.properties?.code?.enum ?? [];
};

t.test('GET /openapi.json from a real node: public, JSON, a valid OpenAPI 3.1 document', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());

  const answer = await call(node.url, 'GET', '/openapi.json');
  t.equal(answer.status, 200, 'no credential needed');
  t.match(answer.headers['content-type'], /^application\/json/);
  const document = answer.body as Document;
  t.equal(document.openapi, '3.1.0');
  t.same((await call(node.url, 'GET', '/openapi.json')).text, answer.text, 'the same document every time');

  const validator = new Validator();
  const result = await validator.validate(structuredClone(document) as unknown as Record<string, unknown>);
  t.same(result.errors ?? [], [], 'no schema errors');
  t.ok(result.valid, 'valid by @seriousme/openapi-schema-validator');
  t.equal(validator.version, '3.1');
  t.doesNotThrow(() => validator.resolveRefs(), 'every $ref resolves');

  const router = liveRouter();
  t.same(undescribed(router, document), [], 'every route of the router is in it, with its method, and described');
  t.ok(router.list().length >= 40, `the router has its routes (${router.list().length})`);
  t.equal(document.paths['/rt']?.get?.responses['101'] !== undefined, true, 'the /rt websocket upgrade is described as a GET answered 101');
  t.equal(document.paths['/machines/{machine}']?.get?.security.length, 1, 'authenticated routes need the bearer');
  t.same(document.paths['/health']?.get?.security, [], 'public routes need nothing');

  t.same(
    document.components.schemas.ErrorCode.enum.slice().sort(),
    [...errorCodes].sort(),
    'every code of src/domain/errors.ts is in ErrorCode',
  );
  const answered = new Set(
    Object.values(document.paths).flatMap((item) =>
      Object.values(item).flatMap((operation) =>
        Object.keys(operation.responses).flatMap((status) => documentedCodes(operation, Number(status))),
      ),
    ),
  );
  // ('conflict' and 'settle-timeout' are in the type, but nothing answers them: see ErrorCode)
  const unanswered = errorCodes.filter((code) => !answered.has(code));
  t.same(unanswered, ['conflict', 'settle-timeout'], 'every code the API answers is named by some operation');

  // What the node really answers is what the document says it may.
  const machineGet = document.paths['/machines/{machine}']?.get;
  const cases: Array<[string, Promise<{ status: number; body: { code: string } }>, Operation | undefined]> = [
    ['no credential', call(node.url, 'GET', '/machines/m'), machineGet],
    ['bad credential', call(node.url, 'GET', '/machines/m', { token: 'nope' }), machineGet],
    ['unknown machine', call(node.url, 'GET', '/machines/m', { token: node.adminKey as string }), machineGet],
    ['malformed name', call(node.url, 'GET', `/machines/${'x'.repeat(200)}`, { token: node.adminKey as string }), machineGet],
    ['bad body', call(node.url, 'POST', '/machines', { token: node.adminKey as string, rawBody: '{' }), document.paths['/machines']?.post],
    ['bad log query', call(node.url, 'GET', '/logs', { token: node.adminKey as string }), document.paths['/logs']?.get],
  ];
  for (const [what, pending, operation] of cases) {
    const { status, body } = await pending;
    t.ok(status >= 400, `${what}: ${status} ${body.code}`);
    t.ok(documentedCodes(operation, status).includes(body.code), `${what}: ${status} ${body.code} is documented`);
  }
});

t.test('a route added without a description in route-docs.ts fails the check above', async (t) => {
  const router = liveRouter();
  router.add('GET', '/machines/:machine/something-new', () => ({ status: 204 }));
  const document = openApiDocument(router.list(), 'http://127.0.0.1') as unknown as Document;
  t.same(undescribed(router, document), ['GET /machines/:machine/something-new']);
  const operation = document.paths['/machines/{machine}/something-new']?.get;
  t.ok(operation, 'it is still in the document (built from the router), marked undescribed');
});

t.test('every description is of a route the router has (none left behind by a removed route)', async (t) => {
  const routes = new Set(
    liveRouter()
      .list()
      .map(({ method, pattern }) => `${method} ${pattern}`),
  );
  t.same(
    Object.keys(routeDocs).filter((key) => !routes.has(key)),
    [],
  );
});
