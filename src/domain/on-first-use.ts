/**
 * `make`, run on the first call and its result kept: for modules few nodes need (a node loads them when
 * first used rather than at start, where each costs every node CPU).
 */
export const onFirstUse = <T>(make: () => T): (() => T) => {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
};
