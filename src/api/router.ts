import { isPrettyId } from '../domain/ids.js';
import { clipped, isSlug } from '../domain/names.js';
import type { ApiRequest, ApiResponse } from './http-types.js';

export type RouteHandler = (request: ApiRequest) => ApiResponse | Promise<ApiResponse>;

interface Route {
  method: string;
  segments: string[];
  handler: RouteHandler;
}

export type RouteMatch =
  | { kind: 'found'; handler: RouteHandler; params: Record<string, string> }
  | { kind: 'wrong-method'; allowed: string[] }
  | { kind: 'no-such-thing'; message: string }
  | { kind: 'none' };

/**
 * Captures that name a machine, an instance or a key can only name one if they have the form such
 * names have: any other is answered 404 before a route runs (and never reaches storage, whose keys
 * are limited to ≈ 2 KB).
 */
const NAMES: Record<string, { valid: (value: string) => boolean; what: string }> = {
  machine: { valid: isSlug, what: 'machine' },
  instance: { valid: isSlug, what: 'instance' },
  keyId: { valid: (value) => isPrettyId(value, 'sbk'), what: 'key' },
};

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
      if (route.method === method) {
        for (const [name, value] of Object.entries(params)) {
          const form = NAMES[name];
          if (form && !form.valid(value)) return { kind: 'no-such-thing', message: `${form.what} ${clipped(value)} does not exist` };
        }
        return { kind: 'found', handler: route.handler, params };
      }
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
