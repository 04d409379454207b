/**
 * The Node.js releases Statehold runs on, as package.json's `engines.node` says. The write-ahead log
 * uses `zlib.crc32` (Node 20.15 and 22.2; never in 21), and undici 7, which makes machine code's
 * fetches, declares 20.18.1. Checked at start (statehold.ts) before any module that needs them loads:
 * on an older Node the import of `crc32` would fail with an error that does not say why.
 */
export const SUPPORTED_NODE = '^20.18.1 || >=22.2.0';

type Version = readonly [number, number, number];

const atLeast = (version: Version, floor: Version): boolean => {
  for (let i = 0; i < 3; i++) {
    if ((version[i] as number) !== floor[i]) return (version[i] as number) > (floor[i] as number);
  }
  return true;
};

/** Why this Node.js (`process.versions.node`, with or without a leading `v`) cannot run Statehold; undefined when it can. */
export const nodeVersionProblem = (version: string): string | undefined => {
  const parsed = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  const numbers = parsed && ([Number(parsed[1]), Number(parsed[2]), Number(parsed[3])] as const);
  const supported = numbers !== null && ((numbers[0] === 20 && atLeast(numbers, [20, 18, 1])) || atLeast(numbers, [22, 2, 0]));
  if (supported) return undefined;
  return `Node.js ${version} cannot run statehold: it needs Node.js 20.18.1 or a later 20, or 22.2.0 or later (${SUPPORTED_NODE}; the write-ahead log uses zlib.crc32)`;
};
