import { encodeCursor } from '../domain/cursor.js';

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
  if (bytes) {
    let total = 0;
    const fits = items.findIndex((item, i) => (total += bytes.of(item)) > bytes.max && i > 0);
    if (fits > 0) {
      items = items.slice(0, fits);
      more = true;
    }
  }
  const last = items.at(-1);
  return more && last !== undefined ? { items, cursor: encodeCursor(positionOf(last)) } : { items };
};
