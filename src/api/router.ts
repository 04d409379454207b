import { isPrettyId } from '../domain/ids.js';
import { clipped, isSlug } from '../domain/names.js';
import type { ApiRequest, ApiResponse } from './http-types.js';

type RouteHandler = (request: ApiRequest) => ApiResponse | Promise<ApiResponse>;

interface Route {
  method: string;
  /** The pattern as added (`/machines/:machine`): what metrics name the route by, never the raw path. */
  pattern: string;
  /** Per segment of the pattern: the literal it must be, or undefined where it captures. */
  literals: Array<string | undefined>;
  /** Per segment: the name it captures under, or undefined for a literal. */
  captures: Array<string | undefined>;
  handler: RouteHandler;
  /** A body limit of its own, below the node's (`--max-body-bytes`): checked before the body is read. */
  maxBodyBytes?: number;
  /** The route verifies a credential: the server checks it before reading a body (see HttpServer). */
  credential: boolean;
  /** How specific its pattern is (more segments, then literals from the left): the most specific that matches a path answers. */
  rank: number;
  /** A route the API does not have, named so that its 404 can say why (`absent`). */
  absent?: string;
}

/** The body a route that takes no credential reads unless it sets a limit of its own (those that take none: a stray one). */
const NO_CREDENTIAL_BODY_BYTES = 4 * 1024;

export interface RouteOptions {
  maxBodyBytes?: number;
  credential?: boolean;
}

export type RouteMatch =
  | { kind: 'found'; handler: RouteHandler; params: Record<string, string>; pattern: string; credential: boolean; maxBodyBytes?: number }
  | { kind: 'wrong-method'; allowed: string[] }
  | { kind: 'no-such-thing'; message: string }
  /** A route's literals match, but a segment it captures is not valid percent-encoding (a 400, not a 404). */
  | { kind: 'bad-path'; message: string }
  | { kind: 'none' };

/**
 * Captures that name a machine, an instance or a key can only name one if they have the form such
 * names have: any other is answered 404 before a route runs (and never reaches storage, whose keys
 * are limited to ≈ 2 KB).
 */
const NAMES: Record<string, { valid: (value: string) => boolean; what: string }> = {
  machine: { valid: isSlug, what: 'machine' },
  instance: { valid: isSlug, what: 'instance' },
  index: { valid: isSlug, what: 'index' },
  keyId: { valid: (value) => isPrettyId(value, 'sbk'), what: 'key' },
};

/**
 * The one router for every route. Patterns are paths whose `:name` segments capture one
 * percent-decoded path segment; literal segments win over captures when both match.
 */
export class Router {
  /** By segment count (only routes of a path's length can match it), most specific first. */
  private readonly routes = new Map<number, Route[]>();
  /** Every route, in the order added. */
  private readonly added: Route[] = [];
  /** Whether routes added now verify a credential (see `credentialed`). */
  private credentialByDefault = false;

  add(method: string, pattern: string, handler: RouteHandler, options: RouteOptions = {}): this {
    const route = this.routeOf(method, pattern, handler, options);
    this.insert(route);
    this.added.push(route);
    return this;
  }

  /**
   * A route the API does not have but a client asks for (smply's invitations, wire-protocol §3.13): its
   * request gets `404 not-found` with `message`, which says why and what to do instead, where any
   * other unknown path gets "no route". Not listed (the API's description does not have it).
   */
  absent(method: string, pattern: string, message: string): this {
    this.insert({ ...this.routeOf(method, pattern, () => ({ status: 404 }), {}), absent: message });
    return this;
  }

  private routeOf(method: string, pattern: string, handler: RouteHandler, options: RouteOptions): Route {
    const segments = splitPath(pattern);
    const credential = options.credential ?? this.credentialByDefault;
    // A route anyone may call reads a body only as large as it says it takes.
    const maxBodyBytes = options.maxBodyBytes ?? (credential ? undefined : NO_CREDENTIAL_BODY_BYTES);
    const literals = segments.map((s) => (s.startsWith(':') ? undefined : s));
    return {
      method: method.toUpperCase(),
      pattern,
      literals,
      captures: segments.map((s) => (s.startsWith(':') ? s.slice(1) : undefined)),
      handler,
      credential,
      rank: literals.reduce((n: number, s) => n * 2 + (s === undefined ? 0 : 1), literals.length),
      ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
    };
  }

  private insert(route: Route): void {
    const sameLength = this.routes.get(route.literals.length) ?? [];
    sameLength.push(route);
    sameLength.sort((a, b) => b.rank - a.rank);
    this.routes.set(route.literals.length, sameLength);
  }

  /**
   * Routes that `register` adds verify a credential before anything else: a request with a body to
   * one of them has its credential checked before the body is read, so that a caller without one
   * cannot make the node hold `--max-body-bytes` per connection.
   */
  credentialed(register: () => void): this {
    this.credentialByDefault = true;
    try {
      register();
    } finally {
      this.credentialByDefault = false;
    }
    return this;
  }

  /** Each route's method and pattern, in the order they were added: what the API's description is built from. */
  list(): Array<{ method: string; pattern: string }> {
    return this.added.map(({ method, pattern }) => ({ method, pattern }));
  }

  match(method: string, path: string): RouteMatch {
    const segments = splitPath(path);
    const allowed: string[] = [];
    let matchedRank: number | undefined;
    let undecodable: string | undefined;
    for (const route of this.routes.get(segments.length) ?? []) {
      if (!literalsMatch(route, segments)) continue;
      // Captures are decoded only for a route whose literal segments all match.
      const params = captured(route, segments);
      if (typeof params === 'string') {
        undecodable ??= params;
        continue;
      }
      // The most specific pattern that matches the path answers alone (405 when it lacks the method):
      // a capture does not take a path that a route with a literal there has.
      if (matchedRank !== undefined && route.rank < matchedRank) break;
      matchedRank = route.rank;
      if (route.absent !== undefined) {
        if (route.method === method) return { kind: 'no-such-thing', message: route.absent };
        continue;
      }
      if (route.method === method) {
        for (const [name, value] of Object.entries(params)) {
          const form = NAMES[name];
          if (form && !form.valid(value)) return { kind: 'no-such-thing', message: `${form.what} ${clipped(value)} does not exist` };
        }
        return {
          kind: 'found',
          handler: route.handler,
          params,
          pattern: route.pattern,
          credential: route.credential,
          ...(route.maxBodyBytes === undefined ? {} : { maxBodyBytes: route.maxBodyBytes }),
        };
      }
      allowed.push(route.method);
    }
    if (allowed.length > 0) return { kind: 'wrong-method', allowed };
    if (undecodable !== undefined)
      return { kind: 'bad-path', message: `path segment ${clipped(undecodable)} is not valid percent-encoding` };
    return { kind: 'none' };
  }
}

/**
 * A path's segments. Empty ones at its ends are ignored (`/machines/` is `/machines`); one between two
 * others (`/machines//i/x`) is kept, so that no route takes it: ignored, it would name another route
 * (`/machines/:machine` with machine `i`).
 */
const splitPath = (path: string): string[] => {
  const segments = path.split('/');
  let start = 0;
  let end = segments.length;
  while (start < end && segments[start] === '') start++;
  while (end > start && segments[end - 1] === '') end--;
  return segments.slice(start, end);
};

const literalsMatch = (route: Route, actual: string[]): boolean => {
  for (let i = 0; i < route.literals.length; i++) {
    const want = route.literals[i];
    // (a capture takes no empty segment either)
    if (want === undefined ? actual[i] === '' : want !== actual[i]) return false;
  }
  return true;
};

/** The route's captures, percent-decoded; or the first segment that does not decode. */
const captured = (route: Route, actual: string[]): Record<string, string> | string => {
  const params: Record<string, string> = {};
  for (let i = 0; i < route.captures.length; i++) {
    const name = route.captures[i];
    if (name === undefined) continue;
    const decoded = safeDecode(actual[i] as string);
    if (decoded === undefined) return actual[i] as string;
    params[name] = decoded;
  }
  return params;
};

const safeDecode = (segment: string): string | undefined => {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
};
