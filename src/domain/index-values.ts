import { type CompiledPath, compilePath, evaluatePath } from './json-path.js';
import type { JsonObject } from './machine-state.js';

/**
 * Secondary indexes (wire-protocol §3.5, docs/indexes.md): what an instance's context puts in each of
 * its machine's indexes, and how index values compare.
 */

/** Values one instance puts in one index; more are dropped (a commit never fails for its index values). */
const MAX_VALUES_PER_INDEX = 100;
/**
 * Longest value indexed, in UTF-8 bytes; longer ones are not indexed. With the org id, machine, index
 * and instance names (≤ 128 characters each) the LMDB key stays well under LMDB's 1,978 bytes.
 */
export const MAX_INDEX_VALUE_BYTES = 512;

/**
 * A string after every value that can be indexed: U+10FFFF is the last code point, and a value of at
 * most MAX_INDEX_VALUE_BYTES bytes holds at most a quarter as many of them. Range reads end here.
 */
export const AFTER_ALL_VALUES = '\u{10FFFF}'.repeat(MAX_INDEX_VALUE_BYTES / 4 + 1);

/** By index name: the values the instance holds there, distinct, in the order its selector found them. */
export type IndexValues = Record<string, string[]>;

/**
 * The values an instance holds in one index. Own members only: an index may be named like a member
 * of every object (`toString`, `constructor`), which a plain lookup would find where the instance
 * holds no value.
 */
export const valuesIn = (values: IndexValues | undefined, index: string): string[] | undefined =>
  values !== undefined && Object.hasOwn(values, index) ? values[index] : undefined;

export type IndexOp = 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte';
export const indexOps: readonly IndexOp[] = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'];

// (in a `u` pattern, \p{Cs} matches only surrogates that are not part of a pair)
// eslint-disable-next-line no-control-regex
const UNINDEXABLE = /[\u0000-\u001f]|\p{Cs}/u;

/**
 * Whether a string can be an index value. Control characters are refused because LMDB's ordered keys
 * use bytes below 0x20 as separators (U+001E splits key parts); ill-formed UTF-16 (a lone surrogate)
 * because it would not come back from the key as it went in; longer ones because keys are bounded.
 */
export const isIndexableValue = (value: string): boolean =>
  !UNINDEXABLE.test(value) && Buffer.byteLength(value, 'utf8') <= MAX_INDEX_VALUE_BYTES;

/**
 * Values of a context one selector may visit (walked, looked at or taken) at a commit; past it, that
 * selector gives no values for that commit. Selectors run on the node's main thread at every commit: a
 * direct path visits a few values; `$..email` every value of the context once; several descents or
 * repeated unions are what this bounds (measured: under 30 ms for the costliest shapes tried).
 */
export const MAX_SELECTOR_VISITS = 50_000;

/** Why a selector cannot be used (finalize refuses it), or undefined. RFC 9535 JSONPath, no filters (domain/json-path.ts). */
export const selectorProblem = (selector: string): string | undefined => {
  const compiled = compilePath(selector);
  return compiled.ok ? undefined : compiled.problem;
};

class SelectorTooCostly extends Error {}
const tooCostly = () => new SelectorTooCostly(`the selector visits more than ${MAX_SELECTOR_VISITS} values`);

// The selectors of the versions in use, compiled once (a bad one as null).
const compiled = new Map<string, CompiledPath | null>();
const COMPILED_CACHE_SIZE = 1_000;

const compiledSelector = (selector: string): CompiledPath | null => {
  const hit = compiled.get(selector);
  if (hit !== undefined) return hit;
  const result = compilePath(selector);
  if (compiled.size >= COMPILED_CACHE_SIZE) compiled.clear();
  compiled.set(selector, result.ok ? result.path : null);
  return result.ok ? result.path : null;
};

/**
 * The values `selectors` (index name → JSONPath into the full context) select from `context`. Each
 * match that is a string is a value; a match that is an array gives each of its string elements;
 * anything else (numbers, booleans, null, objects, nothing matched) gives none. A selector that does
 * not compile (finalize refuses those; a version finalized before may hold one) or visits more than
 * MAX_SELECTOR_VISITS values gives no values: index values never fail a commit. Indexes with no value
 * are left out; undefined when none has any.
 */
export const selectIndexValues = (context: JsonObject, selectors: Record<string, string> | undefined): IndexValues | undefined => {
  if (!selectors) return undefined;
  let found: IndexValues | undefined;
  for (const [index, selector] of Object.entries(selectors)) {
    const path = compiledSelector(selector);
    if (path === null) continue;
    let matches: unknown[];
    try {
      matches = evaluatePath(path, context, { left: MAX_SELECTOR_VISITS, exhausted: tooCostly });
    } catch (error) {
      if (error instanceof SelectorTooCostly) continue;
      throw error;
    }
    const values = new Set<string>();
    const take = (value: unknown) => {
      if (typeof value === 'string' && values.size < MAX_VALUES_PER_INDEX && isIndexableValue(value)) values.add(value);
    };
    for (const match of matches) {
      if (Array.isArray(match)) for (const element of match) take(element);
      else take(match);
      if (values.size >= MAX_VALUES_PER_INDEX) break;
    }
    if (values.size > 0) (found ??= {})[index] = [...values];
  }
  return found;
};

/** The indexes whose values differ between two heads' index values (each such index write is billed). */
export const changedIndexes = (before: IndexValues | undefined, after: IndexValues | undefined): number => {
  if (before === undefined && after === undefined) return 0;
  const differs = (a: string[] | undefined, b: string[] | undefined) =>
    (a?.length ?? 0) !== (b?.length ?? 0) || (a ?? []).some((value) => !b?.includes(value));
  let changed = 0;
  for (const index in before) if (differs(before[index], valuesIn(after, index))) changed++;
  // (indexes only the new head has values in)
  for (const index in after) if (valuesIn(before, index) === undefined) changed++;
  return changed;
};

/**
 * The order of index values: by Unicode code point, which is the UTF-8 byte order LMDB keeps its keys
 * in. JavaScript's `<` compares UTF-16 code units, which puts U+E000–U+FFFF after the astral planes.
 */
export const compareIndexValues = (a: string, b: string): number => {
  if (a === b) return 0;
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.codePointAt(i) as number;
    const y = b.codePointAt(i) as number;
    if (x !== y) return x < y ? -1 : 1;
    if (x > 0xffff) i++;
  }
  // (equal up to the shorter one's end, and not equal)
  return a.length < b.length ? -1 : 1;
};

/** Whether `value` passes `op` against `operand`. */
export const matchesIndexOp = (value: string, op: IndexOp, operand: string): boolean => {
  const order = compareIndexValues(value, operand);
  switch (op) {
    case 'eq':
      return order === 0;
    case 'ne':
      return order !== 0;
    case 'gt':
      return order > 0;
    case 'gte':
      return order >= 0;
    case 'lt':
      return order < 0;
    case 'lte':
      return order <= 0;
  }
};

/** A position in an index: a value and an instance name (the order within one value). */
export interface IndexPosition {
  value: string;
  name: string;
}

/** Index order: by value, then by instance name (slugs are ASCII: `<` is their byte order). */
export const compareIndexPositions = (a: IndexPosition, b: IndexPosition): number =>
  compareIndexValues(a.value, b.value) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
