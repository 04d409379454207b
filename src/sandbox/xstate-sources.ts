/**
 * The one xstate 4.38 copy provided inside isolates: xstate's own ESM build (node_modules/xstate/es),
 * read from disk once per process and compiled as isolated-vm modules per isolate (≈ 10 ms for its
 * 23 modules; see bench/sandbox-step.mjs). Each file's `process.env.NODE_ENV` is replaced by
 * "production", as smply's esbuild `define` does, so no `process` global is needed.
 */
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

let esDir: string | undefined;
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

/** Absolute path of the entry module (es/index.js). */
export function xstateEntryPath(): string {
  return path.join(xstateEsDir(), 'index.js');
}

/** Source of one xstate ES module, by absolute path inside es/ (cached). */
export function xstateSource(file: string): string {
  let src = sources.get(file);
  if (src === undefined) {
    src = readFileSync(file, 'utf8').replace(/process\.env\.NODE_ENV/g, '"production"');
    sources.set(file, src);
  }
  return src;
}

/** Resolves an import made by one xstate module of another (always relative, inside es/). */
export function resolveXstateInternal(specifier: string, fromFile: string): string | undefined {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return undefined;
  const dir = xstateEsDir();
  const target = path.resolve(path.dirname(fromFile), specifier);
  if (!target.startsWith(dir + path.sep) || !existsSync(target)) return undefined;
  return target;
}

export type SpecifierResolution = { ok: true; file: string } | { ok: false; error: string };

const XSTATE_SPECIFIER = /^(?:npm:)?xstate(?:@([^/]*))?(?:\/(.*))?$/;

/**
 * xstate modules user bundles may not import: `registry` lists every live interpreter of the isolate
 * (all instances of the version) by session id, `serviceScope` hands out the interpreter in scope.
 * The harness keeps both to itself (harness-source.ts). Compared case-insensitively.
 */
const PRIVATE_XSTATE_MODULES: ReadonlySet<string> = new Set(['registry', 'servicescope']);

/**
 * Maps what user bundles import to a file of the shared copy:
 * `xstate`, `npm:xstate`, `npm:xstate@4.x` (any range naming major 4) and subpaths such as
 * `npm:xstate/lib/utils` or `xstate/lib/actions` (lib/ and es/ name the same modules), except the
 * registry and serviceScope modules (PRIVATE_XSTATE_MODULES), which only our harness may import.
 */
export function resolveUserSpecifier(specifier: string, allowPrivate = false): SpecifierResolution {
  const m = XSTATE_SPECIFIER.exec(specifier);
  if (!m) {
    return { ok: false, error: `the bundle imports "${specifier}", which is not available: only xstate (4.x) may be imported, everything else must be bundled` };
  }
  const range = m[1];
  if (range !== undefined && range !== '' && !/^[\^~=v<>\s]*4(?:$|[.\s x*])/.test(range) && range !== 'latest') {
    return { ok: false, error: `the bundle imports "${specifier}", but this server provides xstate 4.38 only` };
  }
  const sub = m[2];
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
