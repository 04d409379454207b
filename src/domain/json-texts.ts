/**
 * JSON texts that already exist for an object, so that what crosses the next hop is that text rather
 * than a second encoding of the same value. The one kept today: a step's context, as the isolate's
 * harness wrote it (sandbox/step-result.ts), which the node parses once and then writes into the head
 * it commits (store/lmdb/wal-commits.ts), with the depth the sandbox checked it for, so that the
 * commit does not scan it again. A context of 15 KB was stringified twice more per event before (head
 * and history record) and scanned for its depth once more (bench/JOURNAL.md, 2026-11-29 12:46).
 *
 * Keyed weakly by the object: nothing keeps a text alive past its value, and a value is not changed
 * once parsed (heads are replaced, never edited in place). A text is taken once, by the commit that
 * writes it (on a cluster owner, by its local copy's commit after the TX entry used it): the actor's
 * head in memory does not hold its context twice.
 */

/** A JSON text, and how deeply it nests at most (a bound its maker checked: domain/json-depth.ts). */
export interface KnownJsonText {
  text: string;
  maxDepth: number;
}

const texts = new WeakMap<object, KnownJsonText>();

/**
 * Remembers `text` as the JSON of `value`, which must be `JSON.parse(text)`, nesting at most
 * `maxDepth` levels (checked by the caller: a commit then need not scan the text again). A text with a
 * lone surrogate is not kept: written as UTF-8 it would not read back as the value parsed from it
 * (JSON.stringify escapes those).
 */
export const rememberJsonText = (value: object, text: string, maxDepth: number): void => {
  if ((text as string & { isWellFormed(): boolean }).isWellFormed()) texts.set(value, { text, maxDepth });
};

/** The text remembered for `value`, forgotten from now on; undefined when there is none. */
export const takeJsonText = (value: object): KnownJsonText | undefined => {
  const known = texts.get(value);
  if (known !== undefined) texts.delete(value);
  return known;
};

/**
 * Forgets the text of `value`, if one is remembered: a commit that did not take it (one with messages,
 * which LMDB encodes itself) must not leave a live head holding its context twice.
 */
export const forgetJsonText = (value: object): void => {
  texts.delete(value);
};

/** `json`, the JSON of an object, with one more field last: `field`, whose JSON is `fieldText`. */
export const withJsonField = (json: string, field: string, fieldText: string): string =>
  json === '{}' ? `{"${field}":${fieldText}}` : `${json.slice(0, -1)},"${field}":${fieldText}}`;

/** The JSON of an object, with the remembered text of one of its fields spliced in (see below). */
export interface SplicedJson {
  text: string;
  /** When a remembered text was spliced in: the JSON of the other fields, and how deep the spliced text nests at most. */
  spliced?: { others: string; maxDepth: number };
}

/**
 * `JSON.stringify(object)` for a plain object whose `field` (an object) may have a remembered text:
 * that text is spliced in (the field then comes last) instead of encoding the field again. `keep`: the
 * text stays remembered, for a later hop that writes the same value (a cluster owner's TX entry, then
 * its local copy's commit of the same head).
 */
export const stringifyWithKnownField = <T extends object, K extends keyof T & string>(
  object: T,
  field: K,
  { keep = false }: { keep?: boolean } = {},
): SplicedJson => {
  const value = object[field];
  const known = value !== null && typeof value === 'object' ? (keep ? texts.get(value) : takeJsonText(value)) : undefined;
  if (known === undefined) return { text: JSON.stringify(object) };
  const { [field]: _known, ...rest } = object;
  const others = JSON.stringify(rest);
  return { text: withJsonField(others, field, known.text), spliced: { others, maxDepth: known.maxDepth } };
};
