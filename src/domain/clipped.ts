/**
 * A caller-given text as messages quote it: whole if short, else its start and its length. Apart from
 * names.ts (which re-exports it) so that errors.ts, which names.ts imports, can clip too.
 */
export const clipped = (value: string, max = 100): string =>
  value.length <= max ? value : `${value.slice(0, max)}… (${value.length} characters)`;
