import { invalidParameter } from '../../domain/errors.js';
import { MAX_JSON_DEPTH, tooDeep } from '../../domain/json-depth.js';
import { limits } from '../../domain/limits.js';
import type { ApiContext } from '../api-context.js';
import type { ApiRequest, ApiResponse } from '../http-types.js';
import type { Router } from '../router.js';

/**
 * Machines' http APIs (wire-protocol §3.14): any method on `/http-api/{orgId}/machines/{machine}/{slug}`
 * (and `/http-apis/...`, the spelling some State Backed texts use), without a State Backed token: the
 * machine's handler authenticates the raw request (http-api-runner.ts). A HEAD reaches the GET route
 * and is answered without the body; an OPTIONS is answered by the server as a CORS preflight.
 */
export const registerHttpApiRoutes = (router: Router, context: ApiContext): void => {
  const handle = async (request: ApiRequest): Promise<ApiResponse> => {
    const { orgId, machine, httpApi } = request.params as { orgId: string; machine: string; httpApi: string };
    const answer = await context.httpApis.run({
      orgId,
      machine,
      slug: httpApi,
      request: { method: request.method, headers: request.headers, query: Object.fromEntries(request.query), body: bodyOf(request) },
    });
    return {
      status: answer.status,
      headers: answer.headers,
      ...(answer.body === undefined ? {} : { raw: { contentType: answer.contentType, data: answer.body } }),
    };
  };
  for (const prefix of ['http-api', 'http-apis']) {
    for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])
      // (refused past 1 MiB before the body is read: the route takes no credential)
      router.add(method, `/${prefix}/:orgId/machines/:machine/:httpApi`, handle, { maxBodyBytes: limits.maxHttpApiBodyBytes });
  }
};

/**
 * The body as the handler gets it: JSON parsed, a form as an object of strings (the last of repeated
 * names), text and anything else as a string; no body: undefined.
 */
const bodyOf = (request: ApiRequest): unknown => {
  if (request.body.length === 0) return undefined;
  const type = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const text = request.body.toString('utf8');
  if (type === 'application/json' || type.endsWith('+json')) {
    if (text.trim() === '') return undefined;
    if (tooDeep(text)) throw invalidParameter('body', `the request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep`);
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      throw invalidParameter('body', `the request body is not valid JSON: ${(error as Error).message}`);
    }
  }
  if (type === 'application/x-www-form-urlencoded') return Object.fromEntries(new URLSearchParams(text));
  return text;
};
