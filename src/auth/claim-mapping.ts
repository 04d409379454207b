/**
 * Claim mappings of token exchange (wire-protocol §4.3, docs/token-exchange.md "Mappings"): an IdP
 * mapping turns a subject token's claims into intermediate claims, a token provider's mapping turns
 * those into the `act` of the token we mint.
 *
 * Paths are RFC 9535 JSONPath, parsed by json-p3 (strict, no script evaluation) and evaluated here
 * with a bound on the work (compilePath says why), rather than by jsonpath-plus, which the index
 * selectors use: jsonpath-plus accepts malformed paths (`$.a[`
 * evaluates to nothing instead of failing, so `validateMapping` could not report it), misreads quoted
 * names (`$['we]ird']` looks up `weird`), treats a claim named `*` or `^` as the operator, and answers
 * `$.groups.length` with the array's length. Mappings are written by org admins and run for
 * unauthenticated callers, so the grammar is checked up front and evaluation is bounded.
 */
import { JSONPathEnvironment, JSONPathError, type JSONPathQuery, jsonpath, TokenKind } from 'json-p3';

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
/** Roughly the most JSON one application may select (a minted token's act is at most 8 KiB anyway). */
export const MAX_OUTPUT_BYTES = 64 * 1024;

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

type Selector =
  | { kind: 'name'; name: string }
  | { kind: 'index'; index: number }
  | { kind: 'wildcard' }
  | { kind: 'slice'; start: number | undefined; end: number | undefined; step: number };

interface Segment {
  descendants: boolean;
  selectors: Selector[];
}

export interface CompiledPath {
  segments: Segment[];
  /** At most one node can match: names and indexes only (RFC 9535's singular query). */
  definite: boolean;
}

/** Strict RFC 9535 (json-p3): the library parses; nothing in a path is ever evaluated as code. */
const environment = new JSONPathEnvironment({ strict: true });

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Compiles a JSONPath, or says why it cannot be used. A path without the leading `$` is taken from the
 * root (`sub` is `$.sub`, as the State Backed docs write it). json-p3 parses it; filters are refused
 * (their `match` and `search` functions would run an admin's regular expressions on unauthenticated
 * callers' claims). Evaluation is ours, below, because json-p3's has no bound on the nodes it walks:
 * `$..*[*][*]...` on a 30 KB token took it 300 ms, a union repeating `*` seconds.
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
  const segments: Segment[] = [];
  for (const segment of query.segments) {
    const selectors: Selector[] = [];
    for (const selector of segment.selectors) {
      if (selector instanceof jsonpath.selectors.NameSelector) selectors.push({ kind: 'name', name: selector.name });
      else if (selector instanceof jsonpath.selectors.IndexSelector) selectors.push({ kind: 'index', index: selector.index });
      else if (selector instanceof jsonpath.selectors.WildcardSelector) selectors.push({ kind: 'wildcard' });
      else if (selector instanceof jsonpath.selectors.SliceSelector) selectors.push({ kind: 'slice', start: selector.start, end: selector.stop, step: selector.step ?? 1 });
      else return { ok: false, problem: 'filter selectors ([?...]) are not supported in mappings' };
    }
    segments.push({ descendants: segment.token.kind === TokenKind.DDOT, selectors });
  }
  return { ok: true, path: { segments, definite: query.singularQuery() } };
}

interface Budget {
  /** Values the walk may still visit. */
  left: number;
  /** Roughly the bytes of JSON the selected values may still add up to (each selection counts whole). */
  bytes: number;
}

const spend = (budget: Budget): void => {
  if (--budget.left < 0) throw new MappingError(`the mapping visits more than ${MAX_VISITS} values of its input`);
};

/**
 * Charges a selected value to the budget: its approximate JSON size, walked iteratively (claims may
 * nest deeply). Several selections of one large subtree each count, as the output holds each. A key
 * named __proto__ is refused here as in request bodies: the output becomes an auth context.
 */
function charge(value: Json, budget: Budget): void {
  const stack: Json[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'string') budget.bytes -= node.length + 2;
    else if (Array.isArray(node)) {
      budget.bytes -= 2;
      for (const item of node) stack.push(item);
    } else if (typeof node === 'object' && node !== null) {
      budget.bytes -= 2;
      for (const [key, item] of Object.entries(node)) {
        if (key === '__proto__') throw new MappingError('the input has a key named __proto__, which is not allowed');
        budget.bytes -= key.length + 4;
        stack.push(item);
      }
    } else budget.bytes -= 8;
    if (budget.bytes < 0) throw new MappingError(`the mapping selects more than ${MAX_OUTPUT_BYTES} bytes of its input`);
  }
}

/** The node and all its descendants that have children, in document order; iterative: claims may nest deeply. */
function selfAndDescendants(node: Json, budget: Budget): Json[] {
  const out: Json[] = [];
  const stack: Json[] = [node];
  while (stack.length > 0) {
    const n = stack.pop();
    spend(budget);
    out.push(n);
    const children = Array.isArray(n) ? n : isObject(n) ? Object.values(n) : [];
    for (let k = children.length - 1; k >= 0; k--) {
      const child = children[k];
      if (typeof child === 'object' && child !== null) stack.push(child);
    }
  }
  return out;
}

/** RFC 9535 §2.3 selectors; every value taken is spent from the budget, so repeated unions stay bounded. */
function select(node: Json, selector: Selector, out: Json[], budget: Budget): void {
  const take = (value: Json) => {
    spend(budget);
    out.push(value);
  };
  switch (selector.kind) {
    case 'name':
      // Own properties only: `constructor` or `__proto__` never reach the prototype.
      if (isObject(node) && Object.hasOwn(node, selector.name)) take(node[selector.name]);
      return;
    case 'index':
      if (Array.isArray(node)) {
        const at = selector.index < 0 ? node.length + selector.index : selector.index;
        if (at >= 0 && at < node.length) take(node[at]);
      }
      return;
    case 'wildcard':
      for (const value of Array.isArray(node) ? node : isObject(node) ? Object.values(node) : []) take(value);
      return;
    case 'slice': {
      if (!Array.isArray(node) || selector.step === 0) return;
      const len = node.length;
      const norm = (n: number) => (n < 0 ? n + len : n);
      const { step } = selector;
      if (step > 0) {
        const lower = Math.min(Math.max(norm(selector.start ?? 0), 0), len);
        const upper = Math.min(Math.max(norm(selector.end ?? len), 0), len);
        for (let k = lower; k < upper; k += step) take(node[k]);
      } else {
        const upper = Math.min(Math.max(norm(selector.start ?? len - 1), -1), len - 1);
        const lower = Math.min(Math.max(selector.end === undefined ? -1 : norm(selector.end), -1), len - 1);
        for (let k = upper; k > lower; k += step) take(node[k]);
      }
      return;
    }
  }
}

/** The values `path` selects, in document order, the walk and the selections counted against the budget. */
function evaluate(path: CompiledPath, input: Json, budget: Budget): Json[] {
  let nodes: Json[] = [input];
  for (const segment of path.segments) {
    const next: Json[] = [];
    for (const node of nodes) {
      for (const target of segment.descendants ? selfAndDescendants(node, budget) : [node]) {
        for (const selector of segment.selectors) select(target, selector, next, budget);
      }
    }
    nodes = next;
    if (nodes.length === 0) break;
  }
  for (const value of nodes) charge(value, budget);
  return nodes;
}

/** Values a path selects from `input`, in document order. */
export function queryPath(path: string, input: Json): Json[] {
  return evaluate(compiledOrThrow(path), input, { left: MAX_VISITS, bytes: MAX_OUTPUT_BYTES });
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
  return applyLevel(mapping, input, { left: MAX_VISITS, bytes: MAX_OUTPUT_BYTES });
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
