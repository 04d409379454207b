import { encodeCursor } from '../domain/cursor.js';

/**
 * Cuts one page from `found`, which the store read with a limit of `pageSize + 1`: the extra item only
 * tells that another page exists, and the cursor names the last item shown (wire-protocol §1.5).
 */
export const pageOf = <T>(found: T[], pageSize: number, positionOf: (last: T) => unknown): { items: T[]; cursor?: string } => {
  const items = found.slice(0, pageSize);
  const last = items.at(-1);
  return found.length > pageSize && last !== undefined ? { items, cursor: encodeCursor(positionOf(last)) } : { items };
};
