/**
 * The xstate copies provided inside isolates, read from disk once per process and compiled as
 * isolated-vm modules per isolate:
 * - xstate 4.38, what State Backed machines use: its ESM build (node_modules/xstate/es; ≈ 10 ms for
 *   its 23 modules, see bench/sandbox-step.mjs). Each file's `process.env.NODE_ENV` is replaced by
 *   "production", as smply's esbuild `define` does, so no `process` global is needed.
 * - xstate 5 (installed under the npm alias xstate5): its ESM production build (dist/*.esm.js, 7
 *   modules, ≈ 8 ms), compiled only in isolates whose machine is a v5 one (module-loader.ts).
 */
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

let esDir: string | undefined;
let v5Dir: string | undefined;
const sources = new Map<string, string>();

function xstateEsDir(): string {
  if (esDir === undefined) {
    const pkgPath = require.resolve('xstate/package.json');
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as { version?: string };
    if (!pkg.version?.startsWith('4.')) {
      throw new Error(`the sandbox needs xstate 4.x in node_modules, found ${pkg.version ?? 'unknown'}`);
    }
    esDir = path.join(path.dirname(pkgPath), 'es');
  }
  return esDir;
}

/** xstate 5's dist/ directory (the xstate5 alias; its version is checked once). */
function xstate5Dir(): string {
  if (v5Dir === undefined) {
    const pkgPath = require.resolve('xstate5/package.json');
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as { version?: string };
    if (!pkg.version?.startsWith('5.')) {
      throw new Error(`the sandbox needs xstate 5.x in node_modules/xstate5, found ${pkg.version ?? 'unknown'}`);
    }
    v5Dir = path.join(path.dirname(pkgPath), 'dist');
  }
  return v5Dir;
}

/** The subpaths xstate 5's package exports (besides "."), by the production ESM file each names. */
const XSTATE5_SUBPATHS: Readonly<Record<string, string>> = {
  actors: 'xstate-actors.esm.js',
  actions: 'xstate-actions.esm.js',
  guards: 'xstate-guards.esm.js',
  dev: 'xstate-dev.esm.js',
  graph: 'xstate-graph.esm.js',
};

/** Absolute path of xstate 5's entry module (dist/xstate.esm.js). */
function xstate5EntryPath(): string {
  return path.join(xstate5Dir(), 'xstate.esm.js');
}

/** Absolute path of the entry module (es/index.js). */
function xstateEntryPath(): string {
  return path.join(xstateEsDir(), 'index.js');
}

/** Source of one xstate ES module, by absolute path inside v4's es/ or v5's dist/ (cached). */
export function xstateSource(file: string): string {
  let src = sources.get(file);
  if (src === undefined) {
    src = readFileSync(file, 'utf8').replace(/process\.env\.NODE_ENV/g, '"production"');
    sources.set(file, src);
  }
  return src;
}

/**
 * Resolves an import made by one xstate module of another: always relative, and inside the copy
 * the importing module belongs to.
 */
export function resolveXstateInternal(specifier: string, fromFile: string): string | undefined {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return undefined;
  const dir = fromFile.startsWith(xstate5Dir() + path.sep) ? xstate5Dir() : xstateEsDir();
  const target = path.resolve(path.dirname(fromFile), specifier);
  if (!target.startsWith(dir + path.sep) || !existsSync(target)) return undefined;
  return target;
}

type SpecifierResolution = { ok: true; file: string } | { ok: false; error: string };

const XSTATE_SPECIFIER = /^(?:npm:)?xstate(?:@([^/]*))?(?:\/(.*))?$/;

/**
 * xstate modules user bundles may not import: `registry` lists every live interpreter of the isolate
 * (all instances of the version) by session id, `serviceScope` hands out the interpreter in scope.
 * The harness keeps both to itself (isolate/harness-v4.js, harness-pure-steps.js). Compared case-insensitively.
 */
const PRIVATE_XSTATE_MODULES: ReadonlySet<string> = new Set(['registry', 'servicescope']);

/** The major version a range after `xstate@` names: 4, 5, or undefined for any other. */
function majorOfRange(range: string): 4 | 5 | undefined {
  if (range === '' || range === 'latest') return 4;
  const m = /^[\^~=v<>\s]*([45])(?:$|[.\s x*])/.exec(range);
  return m ? (Number(m[1]) as 4 | 5) : undefined;
}

/** True for the specifiers that name xstate 5 (`xstate@5`, `npm:xstate@^5.1`, `xstate@5/actors`, ...). */
export function isXstate5Specifier(specifier: string): boolean {
  const m = XSTATE_SPECIFIER.exec(specifier);
  return m !== null && m[1] !== undefined && majorOfRange(m[1]) === 5;
}

/**
 * Maps what user bundles import to a file of a shared copy:
 * - xstate 4: `xstate`, `npm:xstate` (no version names 4, as State Backed's smply uploads them),
 *   `npm:xstate@4.x` (any range naming major 4) and subpaths such as `npm:xstate/lib/utils` or
 *   `xstate/lib/actions` (lib/ and es/ name the same modules), except the registry and serviceScope
 *   modules (PRIVATE_XSTATE_MODULES), which only our harness may import;
 * - xstate 5: `xstate@5`, `npm:xstate@^5.x` (any range naming major 5) and the subpaths its package
 *   exports (`xstate@5/actors`, `/actions`, `/guards`, `/dev`, `/graph`).
 */
export function resolveUserSpecifier(specifier: string, allowPrivate = false): SpecifierResolution {
  const m = XSTATE_SPECIFIER.exec(specifier);
  if (!m) {
    return {
      ok: false,
      error: `the bundle imports "${specifier}", which is not available: only xstate (4.x, or 5.x as xstate@5) may be imported, everything else must be bundled`,
    };
  }
  const major = majorOfRange(m[1] ?? '');
  if (major === undefined) {
    return {
      ok: false,
      error: `the bundle imports "${specifier}", but this server provides xstate 4.38 (xstate, xstate@4) and xstate 5 (xstate@5) only`,
    };
  }
  const sub = m[2];
  if (major === 5) {
    if (sub === undefined || sub === '') return { ok: true, file: xstate5EntryPath() };
    const file = XSTATE5_SUBPATHS[sub];
    if (file === undefined || !Object.hasOwn(XSTATE5_SUBPATHS, sub)) {
      return {
        ok: false,
        error: `the bundle imports "${specifier}", which xstate 5 does not export (its subpaths: ${Object.keys(XSTATE5_SUBPATHS).join(', ')})`,
      };
    }
    return { ok: true, file: path.join(xstate5Dir(), file) };
  }
  if (sub === undefined || sub === '') return { ok: true, file: xstateEntryPath() };
  const name = sub.replace(/^(?:lib|es)\//, '').replace(/\.js$/, '');
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
    return { ok: false, error: `the bundle imports "${specifier}", which is not a module of xstate 4` };
  }
  if (!allowPrivate && PRIVATE_XSTATE_MODULES.has(name.toLowerCase())) {
    return {
      ok: false,
      error: `the bundle imports "${specifier}", xstate's ${name} module, which is not available to machines: it would reach the live interpreters of other instances`,
    };
  }
  const file = path.join(xstateEsDir(), `${name}.js`);
  if (!existsSync(file)) {
    return { ok: false, error: `the bundle imports "${specifier}", which is not a module of xstate 4` };
  }
  return { ok: true, file };
}
