import { encodeCursor } from '../domain/cursor.js';
import { countWithinBytes } from '../domain/within-bytes.js';

/**
 * Cuts one page from `found`, which the store read with a limit of `pageSize + 1`: the extra item only
 * tells that another page exists, and the cursor names the last item shown (wire-protocol §1.5). With
 * `bytes`, the page also ends before the item that takes it past `bytes.max`.
 */
export const pageOf = <T>(
  found: T[],
  pageSize: number,
  positionOf: (last: T) => unknown,
  bytes?: { max: number; of: (item: T) => number },
): { items: T[]; cursor?: string } => {
  let items = found.slice(0, pageSize);
  let more = found.length > pageSize;
  // (a page of large items ends early, at least one in it: the cursor goes on from its last)
  const fitting = bytes ? countWithinBytes(items, bytes.max, bytes.of) : items.length;
  if (fitting < items.length) {
    items = items.slice(0, fitting);
    more = true;
  }
  const last = items.at(-1);
  return more && last !== undefined ? { items, cursor: encodeCursor(positionOf(last)) } : { items };
};
