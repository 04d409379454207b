/**
 * How many of `items`, from the first, fit in `maxBytes` together as `bytesOf` counts them: at least
 * one (a single item larger than the budget still goes alone), all of them when they fit. What a page
 * of large items is cut to: a history page of the API, an owner's answer between cluster nodes.
 */
export const countWithinBytes = <T>(items: readonly T[], maxBytes: number, bytesOf: (item: T) => number): number => {
  let total = 0;
  for (let i = 0; i < items.length; i++) {
    total += bytesOf(items[i] as T);
    if (total > maxBytes && i > 0) return i;
  }
  return items.length;
};
