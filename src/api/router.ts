import type { ApiRequest, ApiResponse } from './http-types.js';

export type RouteHandler = (request: ApiRequest) => ApiResponse | Promise<ApiResponse>;

interface Route {
  method: string;
  segments: string[];
  handler: RouteHandler;
}

export type RouteMatch = { kind: 'found'; handler: RouteHandler; params: Record<string, string> } | { kind: 'wrong-method'; allowed: string[] } | { kind: 'none' };

/**
 * The one router for every route. Patterns are paths whose `:name` segments capture one
 * percent-decoded path segment; literal segments win over captures when both match.
 */
export class Router {
  private readonly routes: Route[] = [];

  add(method: string, pattern: string, handler: RouteHandler): this {
    this.routes.push({ method: method.toUpperCase(), segments: splitPath(pattern), handler });
    this.routes.sort((a, b) => specificity(b) - specificity(a));
    return this;
  }

  match(method: string, path: string): RouteMatch {
    const segments = splitPath(path);
    const allowed: string[] = [];
    for (const route of this.routes) {
      const params = matchSegments(route.segments, segments);
      if (!params) continue;
      if (route.method === method) return { kind: 'found', handler: route.handler, params };
      allowed.push(route.method);
    }
    return allowed.length > 0 ? { kind: 'wrong-method', allowed } : { kind: 'none' };
  }
}

const splitPath = (path: string): string[] => path.split('/').filter((s) => s !== '');

const specificity = (route: Route): number => route.segments.reduce((n, s) => n * 2 + (s.startsWith(':') ? 0 : 1), route.segments.length);

const matchSegments = (pattern: string[], actual: string[]): Record<string, string> | undefined => {
  if (pattern.length !== actual.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const want = pattern[i] as string;
    const got = actual[i] as string;
    if (want.startsWith(':')) {
      const decoded = safeDecode(got);
      if (decoded === undefined) return undefined;
      params[want.slice(1)] = decoded;
    } else if (want !== got) {
      return undefined;
    }
  }
  return params;
};

const safeDecode = (segment: string): string | undefined => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
};
