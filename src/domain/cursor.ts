import { invalidParameter } from './errors.js';

/**
 * Opaque, URL-safe list cursors: base64url of a small JSON document naming the position after which the
 * next page starts. Clients echo them back unchanged; anything else is a 400 naming `cursor`.
 */
export const encodeCursor = (position: unknown): string => Buffer.from(JSON.stringify({ a: position })).toString('base64url');

/** Ours hold a name or two (≤ 128 characters each) and an id: anything longer is not one of ours. */
const MAX_CURSOR_CHARS = 1_024;

/** `maxChars`: for cursors that hold longer positions (an index value of up to 512 bytes). */
export const decodeCursor = (cursor: string | null | undefined, maxChars = MAX_CURSOR_CHARS): unknown => {
  if (cursor === null || cursor === undefined || cursor === '') return undefined;
  try {
    if (cursor.length > maxChars) throw new Error('too long');
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('bad alphabet');
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || !('a' in parsed)) throw new Error('bad shape');
    return (parsed as { a: unknown }).a;
  } catch {
    throw invalidParameter('cursor', 'cursor is not one this service returned');
  }
};

export const decodeStringCursor = (cursor: string | null | undefined): string | undefined => {
  const position = decodeCursor(cursor);
  if (position === undefined) return undefined;
  if (typeof position !== 'string') throw invalidParameter('cursor', 'cursor is not one this service returned');
  return position;
};

/** A cursor whose position is `length` strings (a createdAt and an id, say). */
export const decodeStringsCursor = (cursor: string | null | undefined, length: number): string[] | undefined => {
  const position = decodeCursor(cursor);
  if (position === undefined) return undefined;
  if (!Array.isArray(position) || position.length !== length || !position.every((part) => typeof part === 'string')) {
    throw invalidParameter('cursor', 'cursor is not one this service returned');
  }
  return position as string[];
};
