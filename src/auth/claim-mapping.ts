/**
 * Claim mappings of token exchange (wire-protocol §4.3, docs/token-exchange.md "Mappings"): an IdP
 * mapping turns a subject token's claims into intermediate claims, a token provider's mapping turns
 * those into the `act` of the token we mint.
 *
 * Paths are RFC 9535 JSONPath, parsed strictly and evaluated with a bound on the work
 * (domain/json-path.ts), rather than by jsonpath-plus: that accepts malformed paths (`$.a[` evaluates
 * to nothing instead of failing, so `validateMapping` could not report it), misreads quoted names
 * (`$['we]ird']` looks up `weird`), treats a claim named `*` or `^` as the operator, and answers
 * `$.groups.length` with the array's length. Mappings are written by org admins and run for
 * unauthenticated callers, so the grammar is checked up front and evaluation is bounded.
 */
import { type CompiledPath, compilePath, evaluatePath, type VisitBudget } from '../domain/json-path.js';

export { compilePath };

/** Deepest nesting of objects in a mapping (the root object is level 1). */
export const MAX_MAPPING_DEPTH = 16;
/** Most entries (keys, at every level together) in one mapping. */
export const MAX_MAPPING_ENTRIES = 1_000;
/**
 * Nodes one `applyMapping` call may visit. `$..*..*` visits every node once per ancestor, so without
 * a budget a large token with a few of those could keep the event loop busy for seconds.
 */
const MAX_VISITS = 100_000;
/** Roughly the most JSON one application may select (a minted token's act is at most 8 KiB anyway). */
const MAX_OUTPUT_BYTES = 64 * 1024;

const PATH_SUFFIX = '.$';

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A mapping that cannot be applied: invalid (it should have been refused by `validateMapping`) or too costly for its input. */
export class MappingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MappingError';
  }
}

// ---------------------------------------------------------------------------------------------------
// JSONPath (domain/json-path.ts), with the mapping's own budget on what it selects

interface Budget extends VisitBudget {
  /** Roughly the bytes of JSON the selected values may still add up to (each selection counts whole). */
  bytes: number;
}

const newBudget = (): Budget => ({
  left: MAX_VISITS,
  bytes: MAX_OUTPUT_BYTES,
  exhausted: () => new MappingError(`the mapping visits more than ${MAX_VISITS} values of its input`),
});

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

/** The values `path` selects, in document order, the walk and the selections counted against the budget. */
function evaluate(path: CompiledPath, input: Json, budget: Budget): Json[] {
  const nodes = evaluatePath(path, input, budget);
  for (const value of nodes) charge(value, budget);
  return nodes;
}

/** Values a path selects from `input`, in document order. */
export function queryPath(path: string, input: Json): Json[] {
  return evaluate(compiledOrThrow(path), input, newBudget());
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

/**
 * Sets a property without going through `__proto__`'s setter. The key `__proto__` itself is refused,
 * as `validateMapping` refuses it (a mapping stored before it did still reaches here).
 */
const put = (target: Record<string, unknown>, key: string, value: unknown): void => {
  if (key === '__proto__') throw new MappingError('the mapping has the output key "__proto__", which is not allowed');
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
  return applyLevel(mapping, input, newBudget());
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
      // (as in request bodies: the output becomes an auth context that machine code copies about)
      if (output === '__proto__') return `the output key "__proto__" (at ${at}) is not allowed`;
      if (outputs.has(output))
        return `the output key ${JSON.stringify(output)} is given twice (${JSON.stringify(output)} and ${JSON.stringify(output + PATH_SUFFIX)})`;
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
