/**
 * JSONPath as the node evaluates it on data it did not write (token claims in token exchange, instance
 * contexts for index selectors): RFC 9535, parsed by json-p3 in strict mode (nothing in a path is ever
 * evaluated as code; filters are refused), and evaluated here with a bound on the nodes it visits.
 * json-p3's own evaluation has no such bound (`$..*[*][*]...` on a 30 KB token took it 300 ms, a union
 * repeating `*` seconds), nor has jsonpath-plus's (`$..*..*..*` over a 180-deep context took 13 s, and
 * unions or `^` hide more descents from any check of the path's text). Both callers run on the node's
 * main thread, where every request waits for them.
 */
import { createRequire } from 'node:module';
import type * as JsonP3 from 'json-p3';
import type { JSONPathEnvironment, JSONPathQuery } from 'json-p3';
import { onFirstUse } from './on-first-use.js';

/** Longest JSONPath, in characters. */
const MAX_PATH_CHARS = 1_024;

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

/** What an evaluation may still visit; `exhausted` makes the error thrown once it has none left. */
export interface VisitBudget {
  left: number;
  exhausted: () => Error;
}

/**
 * json-p3, loaded by the first path compiled (a version with index selectors, an identity provider's
 * claim mapping): a node that has none spends ≈ 0.03 s less CPU at start. Its CommonJS build, which is
 * what an import of it loads too, so that compilePath can stay synchronous.
 */
const jsonP3 = onFirstUse((): { module: typeof JsonP3; environment: JSONPathEnvironment } => {
  const module = createRequire(import.meta.url)('json-p3') as typeof JsonP3;
  return { module, environment: new module.JSONPathEnvironment({ strict: true }) };
});

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Compiles a JSONPath, or says why it cannot be used. A path without the leading `$` is taken from the
 * root (`sub` is `$.sub`, as the State Backed docs write claim mappings). Filters are refused (their
 * `match` and `search` functions would run regular expressions written by one party on another's data).
 */
export function compilePath(text: string): { ok: true; path: CompiledPath } | { ok: false; problem: string } {
  if (text.length > MAX_PATH_CHARS) return { ok: false, problem: `longer than ${MAX_PATH_CHARS} characters` };
  if (text.trim() === '') return { ok: false, problem: 'empty' };
  const rooted = text.startsWith('$') ? text : text.startsWith('.') || text.startsWith('[') ? `$${text}` : `$.${text}`;
  const { module: json, environment } = jsonP3();
  const { JSONPathError, jsonpath, TokenKind } = json;
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
      else if (selector instanceof jsonpath.selectors.SliceSelector)
        selectors.push({ kind: 'slice', start: selector.start, end: selector.stop, step: selector.step ?? 1 });
      else return { ok: false, problem: 'filter selectors ([?...]) are not supported' };
    }
    segments.push({ descendants: segment.token.kind === TokenKind.DDOT, selectors });
  }
  return { ok: true, path: { segments, definite: query.singularQuery() } };
}

const spend = (budget: VisitBudget): void => {
  if (--budget.left < 0) throw budget.exhausted();
};

/** The node and all its descendants that have children, in document order; iterative: data may nest deeply. */
function selfAndDescendants(node: Json, budget: VisitBudget): Json[] {
  const out: Json[] = [];
  const stack: Json[] = [node];
  while (stack.length > 0) {
    const n = stack.pop();
    spend(budget);
    out.push(n);
    const children = Array.isArray(n) ? n : isObject(n) ? Object.values(n) : [];
    // Every child is looked at, scalars too: a node reached many times (through unions) costs its width each time.
    budget.left -= children.length;
    if (budget.left < 0) throw budget.exhausted();
    for (let k = children.length - 1; k >= 0; k--) {
      const child = children[k];
      if (typeof child === 'object' && child !== null) stack.push(child);
    }
  }
  return out;
}

/** RFC 9535 §2.3 selectors; every value taken is spent from the budget, so repeated unions stay bounded. */
function select(node: Json, selector: Selector, out: Json[], budget: VisitBudget): void {
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

/** The values `path` selects from `input`, in document order, every node visited or taken spent from `budget`. */
export function evaluatePath(path: CompiledPath, input: Json, budget: VisitBudget): Json[] {
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
