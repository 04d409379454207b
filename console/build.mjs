// Builds the web console (console/src) into dist/console: one minified script and one stylesheet,
// named by their content's hash, and index.html naming them. Run by `npm run build` (make build).
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const out = here('../dist/console/');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const result = await build({
  entryPoints: { app: here('src/main.ts'), style: here('style.css') },
  outdir: out,
  entryNames: 'app-[hash]',
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome110', 'firefox110', 'safari16'],
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});
const written = Object.keys(result.metafile.outputs).map((path) => basename(path));
const script = written.find((name) => name.endsWith('.js'));
const style = written.find((name) => name.endsWith('.css'));
if (!script || !style) throw new Error(`the console build wrote ${written.join(', ')}: expected a .js and a .css`);
const page = readFileSync(here('index.html'), 'utf8').replace('{{script}}', `/console/${script}`).replace('{{style}}', `/console/${style}`);
writeFileSync(`${out}index.html`, page);
