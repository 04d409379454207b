/**
 * Builds the module graph of one isolate:
 *   statehold:entry ──▶ statehold:bundle (user code) ──▶ xstate (shared copy, es/*.js)
 *                   └─▶ statehold:harness ───────────────▶ xstate
 *                                        └─▶ its parts (./harness-*.js) ─▶ xstate
 *   statehold:entry5 ─▶ xstate@5 (shared v5 copy, dist/*.esm.js), statehold:harness
 * The harness is evaluated before the bundle (it must take the hidden plumbing off the global object
 * before user code runs); the entry module, evaluated last, hands the bundle namespace to the harness.
 * The v5 entry hands the harness the shared xstate 5 copy, only in isolates that need it: before the
 * bundle when the bundle imports it (so the harness captures its methods before user code can reach
 * them), after the bundle when the bundle's default export is a v5 machine of a bundled xstate copy
 * (user code cannot reach the shared copy then).
 * User code can only import xstate specifiers: `statehold:*` names and the harness's parts resolve
 * only for our own modules.
 */
import ivm from 'isolated-vm';
import { BundleValidationError } from './errors.js';
import { isXstate5Specifier, resolveUserSpecifier, resolveXstateInternal, xstateSource } from './xstate-sources.js';
import { HARNESS_SOURCE, HARNESS_PART_SOURCES, ENTRY_SOURCE, ENTRY5_SOURCE } from './isolate-sources.js';

const BUNDLE_FILENAME = 'file:///statehold/bundle.mjs';

/** "Unexpected token ';' [file:///statehold/bundle.mjs:2:9]" → "SyntaxError at line 2, column 9: Unexpected token ';'" */
function describeCompileError(e: unknown): string {
  const name = e instanceof Error ? e.name : 'Error';
  const message = e instanceof Error ? e.message : String(e);
  const m = /^(.*) \[[^\]]*:(\d+):(\d+)\]$/s.exec(message);
  if (m) return `${name} at line ${m[2]}, column ${m[3]}: ${m[1]}`;
  return `${name}: ${message}`;
}

export class IsolateModules {
  private readonly xstateByFile = new Map<string, ivm.Module>();
  private readonly fileOf = new Map<ivm.Module, string>();
  private bundleModule: ivm.Module | undefined;
  private harnessModule: ivm.Module | undefined;
  /** The harness and its parts: the modules that may import the parts and xstate's private modules. */
  private readonly harnessModules = new Set<ivm.Module>();
  private readonly partBySpecifier = new Map<string, ivm.Module>();
  private xstate5Bound = false;
  /** The bundle imports the shared xstate 5 (known once compiled). */
  bundleImportsXstate5 = false;

  constructor(
    private readonly isolate: ivm.Isolate,
    private readonly context: ivm.Context,
  ) {}

  /** Compiles the user bundle; syntax errors become BundleValidationErrors with line and column. */
  compileBundle(code: string): ivm.Module {
    let mod: ivm.Module;
    try {
      mod = this.isolate.compileModuleSync(code, { filename: BUNDLE_FILENAME });
    } catch (e) {
      throw new BundleValidationError(`the bundle is not a valid ES module: ${describeCompileError(e)}`);
    }
    for (const specifier of mod.dependencySpecifiers) {
      const r = resolveUserSpecifier(specifier);
      if (!r.ok) throw new BundleValidationError(r.error);
      if (isXstate5Specifier(specifier)) this.bundleImportsXstate5 = true;
    }
    this.bundleModule = mod;
    return mod;
  }

  /** Compiles and evaluates the harness (and the xstate modules it pulls in). */
  loadHarness(timeoutMs: number): ivm.Module {
    const mod = this.isolate.compileModuleSync(HARNESS_SOURCE, { filename: 'file:///statehold/harness.mjs' });
    // set first: resolve() lets the harness (only) import its parts and xstate's private modules
    this.harnessModule = mod;
    this.harnessModules.add(mod);
    mod.instantiateSync(this.context, (s, r) => this.resolve(s, r));
    mod.evaluateSync({ timeout: timeoutMs });
    return mod;
  }

  /** Links the bundle. Import errors were reported by compileBundle already. */
  instantiateBundle(): void {
    this.bundle().instantiateSync(this.context, (s, r) => this.resolve(s, r));
  }

  bundle(): ivm.Module {
    if (!this.bundleModule) throw new Error('bundle not compiled');
    return this.bundleModule;
  }

  /** Binds the evaluated bundle to the harness. */
  bindEntry(timeoutMs: number): void {
    const entry = this.isolate.compileModuleSync(ENTRY_SOURCE, { filename: 'file:///statehold/entry.mjs' });
    entry.instantiateSync(this.context, (s, r) => this.resolve(s, r));
    entry.evaluateSync({ timeout: timeoutMs });
  }

  /** Evaluates the shared xstate 5 copy and hands it to the harness (once; after loadHarness). */
  bindXstate5(timeoutMs: number): void {
    if (this.xstate5Bound) return;
    this.xstate5Bound = true;
    const entry = this.isolate.compileModuleSync(ENTRY5_SOURCE, { filename: 'file:///statehold/entry5.mjs' });
    entry.instantiateSync(this.context, (s, r) => this.resolve(s, r));
    entry.evaluateSync({ timeout: timeoutMs });
  }

  private resolve(specifier: string, referrer: ivm.Module): ivm.Module {
    const xstateFile = this.fileOf.get(referrer);
    if (xstateFile !== undefined) {
      const target = resolveXstateInternal(specifier, xstateFile);
      if (target === undefined) throw new Error(`xstate module import not found: ${specifier}`);
      return this.xstateModule(target);
    }
    const fromHarness = this.harnessModules.has(referrer);
    if (fromHarness) {
      const part = this.harnessPart(specifier);
      if (part) return part;
    }
    if (referrer !== this.bundleModule && !fromHarness) {
      // our entry module (the only other referrer)
      if (specifier === 'statehold:bundle') return this.bundle();
      if (specifier === 'statehold:harness' && this.harnessModule) return this.harnessModule;
    }
    const r = resolveUserSpecifier(specifier, fromHarness);
    if (!r.ok) throw new BundleValidationError(r.error);
    return this.xstateModule(r.file);
  }

  /** A part of the harness (./harness-*.js), compiled once; undefined for any other specifier. */
  private harnessPart(specifier: string): ivm.Module | undefined {
    let mod = this.partBySpecifier.get(specifier);
    if (mod) return mod;
    const source = HARNESS_PART_SOURCES.get(specifier);
    if (source === undefined) return undefined;
    mod = this.isolate.compileModuleSync(source, { filename: `file:///statehold/${specifier.slice(2, -3)}.mjs` });
    this.partBySpecifier.set(specifier, mod);
    this.harnessModules.add(mod);
    return mod;
  }

  private xstateModule(file: string): ivm.Module {
    let mod = this.xstateByFile.get(file);
    if (!mod) {
      mod = this.isolate.compileModuleSync(xstateSource(file), { filename: `file://${file}` });
      this.xstateByFile.set(file, mod);
      this.fileOf.set(mod, file);
    }
    return mod;
  }
}
