/**
 * JSON texts that already exist for an object, so that what crosses the next hop is that text rather
 * than a second encoding of the same value. The one kept today: a step's context, as the isolate's
 * harness wrote it (sandbox/step-result.ts), which the node parses once and then writes into the head
 * it commits (store/lmdb/wal-commits.ts). A context of 20 KB was stringified twice more per event
 * before (head and history record); now never (bench/JOURNAL.md, 2026-11-29 13:30).
 *
 * Keyed weakly by the object: nothing keeps a text alive past its value, and a value is not changed
 * once parsed (heads are replaced, never edited in place). A text is taken once, by the commit that
 * writes it: the actor's head in memory does not hold its context twice.
 */
const texts = new WeakMap<object, string>();

/**
 * Remembers `text` as the JSON of `value`, which must be `JSON.parse(text)`. A text with a lone
 * surrogate is not kept: written as UTF-8 it would not read back as the value parsed from it
 * (JSON.stringify escapes those).
 */
export const rememberJsonText = (value: object, text: string): void => {
  if ((text as string & { isWellFormed(): boolean }).isWellFormed()) texts.set(value, text);
};

/** The text remembered for `value`, forgotten from now on; undefined when there is none. */
export const takeJsonText = (value: object): string | undefined => {
  const text = texts.get(value);
  if (text !== undefined) texts.delete(value);
  return text;
};

/**
 * `JSON.stringify(object)` for a plain object whose `field` (an object) may have a remembered text:
 * that text is spliced in (the field then comes last) instead of encoding the field again.
 */
export const stringifyWithKnownField = <T extends object, K extends keyof T & string>(object: T, field: K): string => {
  const value = object[field];
  const text = value !== null && typeof value === 'object' ? takeJsonText(value) : undefined;
  if (text === undefined) return JSON.stringify(object);
  const { [field]: _known, ...rest } = object;
  const others = JSON.stringify(rest);
  return others === '{}' ? `{"${field}":${text}}` : `${others.slice(0, -1)},"${field}":${text}}`;
};
