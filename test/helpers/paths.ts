import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository's root (no trailing separator): the nearest folder above this module that holds a
 * package.json. `make test` runs the tests compiled into dist-test/ (test/build-tests.mjs), so a path
 * counted from where a test file sits would point into that copy.
 */
export const repoRoot = ((): string => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error('no package.json above the test helpers');
  }
})();
