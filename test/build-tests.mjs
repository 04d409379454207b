// Builds the tests for `make test`: every test/**/*.ts compiled on its own (types stripped by esbuild,
// no bundling) into dist-test/test/, with a source map, so tap runs plain JavaScript. A TypeScript
// loader in every test process (tsx, ts-node) cost ≈ 0.6 s of CPU per test file here, ≈ 80 CPU-s a run.
// The tests' types are checked by `npm run verify` (tsconfig.test.json), not here.
//
// dist-test/src is a link to dist/: a test's `../src/x.js` is the module `make build` compiled, the
// code the nodes it starts run. dist-test/{cluster,bench} link to the scripts the tests import, and
// what is not TypeScript under test/ is linked in place. Paths to the repository's own files are
// taken from test/helpers/paths.ts (repoRoot), never from where a compiled test sits.
import { transform } from 'esbuild';
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'dist-test');
const started = Date.now();

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'test'), { recursive: true });
for (const [link, target] of [
  ['src', 'dist'],
  ['dist', 'dist'],
  ['cluster', 'cluster'],
  ['bench', 'bench'],
])
  symlinkSync(join(root, target), join(out, link), 'dir');

const filesUnder = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );

let compiled = 0;
await Promise.all(
  filesUnder(join(root, 'test')).map(async (file) => {
    const path = relative(root, file);
    if (path === 'test/build-tests.mjs') return;
    const target = join(out, path);
    mkdirSync(dirname(target), { recursive: true });
    if (!file.endsWith('.ts')) {
      symlinkSync(file, target);
      return;
    }
    const js = target.replace(/\.ts$/, '.js');
    const result = await transform(readFileSync(file, 'utf8'), {
      loader: 'ts',
      format: 'esm',
      target: 'node20',
      platform: 'node',
      sourcemap: 'external',
      // (the map names the source from the compiled file's place, so stacks point at test/…/x.ts)
      sourcefile: relative(dirname(js), file),
      sourcesContent: false,
    });
    writeFileSync(js, `${result.code}//# sourceMappingURL=${relative(dirname(js), `${js}.map`)}\n`);
    writeFileSync(`${js}.map`, result.map);
    compiled++;
  }),
);
console.log(`built ${compiled} test modules into dist-test/ in ${Date.now() - started} ms`);
