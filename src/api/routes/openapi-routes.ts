import type { ApiContext } from '../api-context.js';
import { openApiDocument } from '../openapi/openapi-document.js';
import type { Router } from '../router.js';

/**
 * GET /openapi.json, no credential: the OpenAPI 3.1 description of every route the router lists
 * (openapi/route-docs.ts). Built on the first request, once every route is added and the public URL
 * is known, and kept.
 */
export const registerOpenApiRoute = (router: Router, context: ApiContext): void => {
  let document: string | undefined;
  router.add('GET', '/openapi.json', () => {
    document ??= JSON.stringify(openApiDocument(router.list(), context.settings.publicUrl));
    return { status: 200, raw: { contentType: 'application/json', data: document } };
  });
};
