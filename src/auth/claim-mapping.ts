/**
 * Claim mappings of token exchange (wire-protocol §4.3, docs/token-exchange.md "Mappings"): an IdP
 * mapping turns a subject token's claims into intermediate claims, a token provider's mapping turns
 * those into the `act` of the token we mint.
 *
 * The JSONPath here is a strict subset of RFC 9535, parsed and evaluated by this module rather than by
 * jsonpath-plus (which the index selectors use). jsonpath-plus splits paths with regular expressions:
 * it accepts malformed paths (`$.a[` evaluates to nothing instead of failing, so `validateMapping`
 * could not report it), misreads quoted names (`$['we]ird']` looks up `weird`), treats a claim that
 * happens to be named `*` or `^` as that claim rather than the operator, answers `$.groups.length`
 * with the array's length, and keeps every path it ever parsed in a global cache. Mappings are
 * written by org admins and run on the node for unauthenticated callers, so the grammar is checked up
 * front and nothing in it evaluates code: filters (`?(...)`) and scripts (`(...)`) are refused.
 */

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
  /** At most one node can match: no wildcard, slice, union or descendant segment. */
  definite: boolean;
}

class PathSyntaxError extends Error {}

const NAME_FIRST = /[A-Za-z_\u0080-\uffff]/;
const NAME_CHAR = /[A-Za-z0-9_\-\u0080-\uffff]/;
const INTEGER = /^-?(0|[1-9][0-9]*)$/;

/**
 * Parses a path; a path that does not start with `$` is relative to the root (`sub` is `$.sub`,
 * `[0]` is `$[0]`, `..id` is `$..id`). Throws PathSyntaxError with a reason naming the position.
 */
function parsePath(text: string): CompiledPath {
  const path = text.startsWith('$') ? text : text.startsWith('[') || text.startsWith('.') ? `$${text}` : `$.${text}`;
  const segments: Segment[] = [];
  let i = 1;
  const fail = (why: string): never => {
    throw new PathSyntaxError(`${why} at character ${Math.max(0, i - (path.length - text.length)) + 1}`);
  };
  const readDotName = (): string => {
    const start = i;
    if (i >= path.length || !NAME_FIRST.test(path[i] as string)) fail('expected a name (letters, digits, _ or -; quote other names: [\'name\'])');
    while (i < path.length && NAME_CHAR.test(path[i] as string)) i++;
    return path.slice(start, i);
  };
  while (i < path.length) {
    const c = path[i];
    if (c === '.') {
      const descendants = path[i + 1] === '.';
      i += descendants ? 2 : 1;
      if (path[i] === '*') {
        i++;
        segments.push({ descendants, selectors: [{ kind: 'wildcard' }] });
      } else if (descendants && path[i] === '[') {
        i++;
        segments.push({ descendants, selectors: readBracket() });
      } else {
        segments.push({ descendants, selectors: [{ kind: 'name', name: readDotName() }] });
      }
    } else if (c === '[') {
      i++;
      segments.push({ descendants: false, selectors: readBracket() });
    } else {
      fail(`unexpected ${JSON.stringify(c)}`);
    }
  }

  function skipSpace(): void {
    while (i < path.length && /[ \t\n\r]/.test(path[i] as string)) i++;
  }

  // After the `[`: selectors separated by commas, up to and including the `]`.
  function readBracket(): Selector[] {
    const selectors: Selector[] = [];
    for (;;) {
      skipSpace();
      selectors.push(readSelector());
      skipSpace();
      if (path[i] === ',') {
        i++;
        continue;
      }
      if (path[i] === ']') {
        i++;
        return selectors;
      }
      return fail(i >= path.length ? 'unclosed [' : `unexpected ${JSON.stringify(path[i])} in brackets`);
    }
  }

  function readSelector(): Selector {
    const c = path[i];
    if (c === '?') fail('filter expressions (?...) are not supported');
    if (c === '(') fail('script expressions ((...)) are not supported');
    if (c === '*') {
      i++;
      return { kind: 'wildcard' };
    }
    if (c === "'" || c === '"') return { kind: 'name', name: readQuoted(c) };
    const m = /^(-?[0-9]+)?\s*(?::\s*(-?[0-9]+)?\s*(?::\s*(-?[0-9]+)?)?)?/.exec(path.slice(i));
    const matched = m?.[0] ?? '';
    if (matched.trim() === '') return fail(i >= path.length ? 'unclosed [' : `unexpected ${JSON.stringify(c)} in brackets (quote names: ['name'])`);
    const numbers = [m?.[1], m?.[2], m?.[3]];
    for (const n of numbers) if (n !== undefined && (!INTEGER.test(n) || !Number.isSafeInteger(Number(n)))) fail(`${n} is not an integer without leading zeros`);
    i += matched.trimEnd().length;
    if (!matched.includes(':')) return { kind: 'index', index: Number(numbers[0]) };
    const step = numbers[2] === undefined ? 1 : Number(numbers[2]);
    if (step === 0) fail('a slice step of 0 selects nothing');
    return {
      kind: 'slice',
      start: numbers[0] === undefined ? undefined : Number(numbers[0]),
      end: numbers[1] === undefined ? undefined : Number(numbers[1]),
      step,
    };
  }

  function readQuoted(quote: string): string {
    i++;
    let out = '';
    while (i < path.length && path[i] !== quote) {
      const c = path[i] as string;
      if (c === '\\') {
        const e = path[i + 1];
        const simple: Record<string, string> = { '\\': '\\', '/': '/', "'": "'", '"': '"', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
        if (e !== undefined && simple[e] !== undefined) {
          out += simple[e];
          i += 2;
        } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(path.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(path.slice(i + 2, i + 6), 16));
          i += 6;
        } else {
          fail('invalid escape in a quoted name');
        }
      } else if (c < ' ') {
        fail('a control character in a quoted name (escape it)');
      } else {
        out += c;
        i++;
      }
    }
    if (i >= path.length) fail('unterminated quoted name');
    i++;
    return out;
  }

  const definite = segments.every((s) => !s.descendants && s.selectors.length === 1 && (s.selectors[0]?.kind === 'name' || s.selectors[0]?.kind === 'index'));
  return { segments, definite };
}

/** Compiles a JSONPath, or says why it cannot be used. */
export function compilePath(text: string): { ok: true; path: CompiledPath } | { ok: false; problem: string } {
  if (text.length > MAX_PATH_CHARS) return { ok: false, problem: `longer than ${MAX_PATH_CHARS} characters` };
  if (text.trim() === '') return { ok: false, problem: 'empty' };
  try {
    return { ok: true, path: parsePath(text) };
  } catch (e) {
    if (e instanceof PathSyntaxError) return { ok: false, problem: e.message };
    throw e;
  }
}

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Budget {
  left: number;
}

const spend = (budget: Budget): void => {
  if (--budget.left < 0) throw new MappingError(`the mapping visits more than ${MAX_VISITS} values of its input`);
};

/** The node and all its descendants, in document order; iterative because claims may nest deeply. */
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

function select(node: Json, selector: Selector, out: Json[], budget: Budget): void {
  switch (selector.kind) {
    case 'name':
      // Own properties only: `constructor` or `__proto__` never reach the prototype.
      if (isObject(node) && Object.hasOwn(node, selector.name)) out.push(node[selector.name]);
      return;
    case 'index':
      if (Array.isArray(node)) {
        const at = selector.index < 0 ? node.length + selector.index : selector.index;
        if (at >= 0 && at < node.length) out.push(node[at]);
      }
      return;
    case 'wildcard':
      for (const v of Array.isArray(node) ? node : isObject(node) ? Object.values(node) : []) {
        spend(budget);
        out.push(v);
      }
      return;
    case 'slice': {
      if (!Array.isArray(node)) return;
      const len = node.length;
      const norm = (n: number) => (n < 0 ? n + len : n);
      const { step } = selector;
      if (step > 0) {
        const lower = Math.min(Math.max(norm(selector.start ?? 0), 0), len);
        const upper = Math.min(Math.max(norm(selector.end ?? len), 0), len);
        for (let k = lower; k < upper; k += step) {
          spend(budget);
          out.push(node[k]);
        }
      } else {
        const upper = Math.min(Math.max(norm(selector.start ?? len - 1), -1), len - 1);
        const lower = Math.min(Math.max(selector.end === undefined ? -1 : norm(selector.end), -1), len - 1);
        for (let k = upper; k > lower; k += step) {
          spend(budget);
          out.push(node[k]);
        }
      }
      return;
    }
  }
}

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
  return nodes;
}

/** Values a path selects from `input`, in document order (RFC 9535 semantics for the supported subset). */
export function queryPath(path: string, input: Json): Json[] {
  const compiled = compiledOrThrow(path);
  return evaluate(compiled, input, { left: MAX_VISITS });
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
