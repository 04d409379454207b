/**
 * Claim mappings of token exchange (wire-protocol §4.3, docs/token-exchange.md "Mappings"): an IdP
 * mapping turns a subject token's claims into intermediate claims, a token provider's mapping turns
 * those into the `act` of the token we mint.
 *
 * Paths are RFC 9535 JSONPath, parsed and evaluated by json-p3 (strict, no script evaluation) rather
 * than by jsonpath-plus, which the index selectors use: jsonpath-plus accepts malformed paths (`$.a[`
 * evaluates to nothing instead of failing, so `validateMapping` could not report it), misreads quoted
 * names (`$['we]ird']` looks up `weird`), treats a claim named `*` or `^` as the operator, and answers
 * `$.groups.length` with the array's length. Mappings are written by org admins and run for
 * unauthenticated callers, so the grammar is checked up front and evaluation is bounded.
 */
import { JSONPathEnvironment, JSONPathError, type JSONPathQuery, type JSONValue, jsonpath, TokenKind } from 'json-p3';

/** Deepest nesting of objects in a mapping (the root object is level 1). */
export const MAX_MAPPING_DEPTH = 16;
/** Most entries (keys, at every level together) in one mapping. */
export const MAX_MAPPING_ENTRIES = 1_000;
/** Longest JSONPath, in characters. */
export const MAX_PATH_CHARS = 1_024;
/**
 * Nodes one `applyMapping` call may visit. `$..*..*` visits every node once per ancestor, so without
 * a budget a large token with a few of those could keep the event loop busy for seconds.
 */
export const MAX_VISITS = 100_000;

const PATH_SUFFIX = '.$';

/** A mapping that cannot be applied: invalid (it should have been refused by `validateMapping`) or too costly for its input. */
export class MappingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MappingError';
  }
}

// ---------------------------------------------------------------------------------------------------
// JSONPath

export interface CompiledPath {
  query: JSONPathQuery;
  /** At most one node can match: names and indexes only (RFC 9535's singular query). */
  definite: boolean;
}

/**
 * Strict RFC 9535 (json-p3), on a deeply nested input no deeper than this (claims are no deeper than
 * MAX_JSON_DEPTH already). Object members are only ever own properties there, never the prototype's.
 */
const environment = new JSONPathEnvironment({ strict: true, maxRecursionDepth: 128 });

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Compiles a JSONPath, or says why it cannot be used. A path without the leading `$` is taken from the
 * root (`sub` is `$.sub`, as the State Backed docs write it). Filters are refused: their `match` and
 * `search` functions run regular expressions an org admin wrote on an unauthenticated caller's claims.
 * Two descendant segments or more are refused: each multiplies the nodes visited by the input's size.
 */
export function compilePath(text: string): { ok: true; path: CompiledPath } | { ok: false; problem: string } {
  if (text.length > MAX_PATH_CHARS) return { ok: false, problem: `longer than ${MAX_PATH_CHARS} characters` };
  if (text.trim() === '') return { ok: false, problem: 'empty' };
  const rooted = text.startsWith('$') ? text : text.startsWith('.') || text.startsWith('[') ? `$${text}` : `$.${text}`;
  let query: JSONPathQuery;
  try {
    query = environment.compile(rooted);
  } catch (e) {
    if (e instanceof JSONPathError) return { ok: false, problem: e.message };
    throw e;
  }
  if (query.segments.some((segment) => segment.selectors.some((selector) => selector instanceof jsonpath.selectors.FilterSelector))) {
    return { ok: false, problem: 'filter selectors ([?...]) are not supported in mappings' };
  }
  if (query.segments.filter((segment) => segment.token.kind === TokenKind.DDOT).length > 1) {
    return { ok: false, problem: 'at most one descendant segment (..) per path' };
  }
  return { ok: true, path: { query, definite: query.singularQuery() } };
}

interface Budget {
  left: number;
}

/** The values `path` selects, in document order, each counted against the budget. */
function evaluate(path: CompiledPath, input: Json, budget: Budget): Json[] {
  const out: Json[] = [];
  try {
    for (const node of path.query.lazyQuery(input as JSONValue)) {
      if (--budget.left < 0) throw new MappingError(`the mapping visits more than ${MAX_VISITS} values of its input`);
      out.push(node.value);
    }
  } catch (e) {
    if (e instanceof JSONPathError) throw new MappingError(`the mapping could not be applied: ${e.message}`);
    throw e;
  }
  return out;
}

/** Values a path selects from `input`, in document order. */
export function queryPath(path: string, input: Json): Json[] {
  return evaluate(compiledOrThrow(path), input, { left: MAX_VISITS });
}

// A handful of mappings (one per IdP and token provider of the orgs in use) are applied over and over.
const compiledCache = new Map<string, CompiledPath>();
const COMPILED_CACHE_SIZE = 1_000;

function compiledOrThrow(text: string): CompiledPath {
  const hit = compiledCache.get(text);
  if (hit) return hit;
  const result = compilePath(text);
  if (!result.ok) throw new MappingError(`invalid JSONPath ${JSON.stringify(text.slice(0, 80))}: ${result.problem}`);
  if (compiledCache.size >= COMPILED_CACHE_SIZE) compiledCache.clear();
  compiledCache.set(text, result.path);
  return result.path;
}

// ---------------------------------------------------------------------------------------------------
// Mappings

/** Sets a property without going through `__proto__`'s setter, whatever the key. */
const put = (target: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
};

/**
 * Applies a mapping (wire-protocol §4.3): a key ending in `.$` takes the value its JSONPath selects
 * from `input` (the key without `.$`); a path that selects nothing leaves its key out; a definite path
 * gives its one value, any other path the array of all it selects. Nested objects are mappings in
 * turn; every other value (arrays included) is copied as a literal. Throws MappingError for a mapping
 * `validateMapping` refuses, or when evaluating it costs more than MAX_VISITS.
 */
export function applyMapping(mapping: Record<string, unknown>, input: Record<string, unknown>): Record<string, unknown> {
  return applyLevel(mapping, input, { left: MAX_VISITS });
}

function applyLevel(mapping: Record<string, unknown>, input: Json, budget: Budget): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(mapping)) {
    if (key.endsWith(PATH_SUFFIX)) {
      if (typeof value !== 'string') throw new MappingError(`the value of ${JSON.stringify(key)} is not a JSONPath string`);
      const path = compiledOrThrow(value);
      const matches = evaluate(path, input, budget);
      if (matches.length === 0) continue;
      put(out, key.slice(0, -PATH_SUFFIX.length), path.definite ? matches[0] : matches);
    } else if (isObject(value)) {
      put(out, key, applyLevel(value, input, budget));
    } else {
      put(out, key, value);
    }
  }
  return out;
}

/**
 * Why `mapping` cannot be stored as a mapping, or undefined when it can: it must be a JSON object,
 * every `.$` value a supported JSONPath, no output key given twice (`sub` beside `sub.$`), at most
 * MAX_MAPPING_DEPTH levels of objects and MAX_MAPPING_ENTRIES keys in all.
 */
export function validateMapping(mapping: unknown): string | undefined {
  if (!isObject(mapping)) return 'the mapping must be a JSON object';
  let entries = 0;
  const check = (level: Record<string, unknown>, where: string, depth: number): string | undefined => {
    if (depth > MAX_MAPPING_DEPTH) return `the mapping nests objects deeper than ${MAX_MAPPING_DEPTH} levels (at ${where})`;
    const outputs = new Set<string>();
    for (const [key, value] of Object.entries(level)) {
      if (++entries > MAX_MAPPING_ENTRIES) return `the mapping has more than ${MAX_MAPPING_ENTRIES} keys`;
      const at = `${where}${where === '' ? '' : '.'}${key}`;
      const isPath = key.endsWith(PATH_SUFFIX);
      const output = isPath ? key.slice(0, -PATH_SUFFIX.length) : key;
      if (isPath && output === '') return `the key ${JSON.stringify(key)} names no output key`;
      if (outputs.has(output)) return `the output key ${JSON.stringify(output)} is given twice (${JSON.stringify(output)} and ${JSON.stringify(output + PATH_SUFFIX)})`;
      outputs.add(output);
      if (isPath) {
        if (typeof value !== 'string') return `the value of ${at} must be a JSONPath string (keys ending in .$ are paths)`;
        const compiled = compilePath(value);
        if (!compiled.ok) return `the value of ${at} is not a supported JSONPath (${compiled.problem})`;
      } else if (isObject(value)) {
        const problem = check(value, at, depth + 1);
        if (problem !== undefined) return problem;
      }
    }
    return undefined;
  };
  return check(mapping, '', 1);
}
