/**
 * Upload-time check of a migration bundle (wire-protocol §7.5): it parses, imports only what a machine
 * bundle may, its top-level code finishes within the limits, and it exports `upgradeState` and
 * `upgradeContext` as functions. Nothing is called. A throw-away isolate without the machine harness:
 * the console is a silent stub and no other host global is installed, so top-level code that needs
 * fetch or crypto fails here (it would have nothing to talk to at upload time anyway).
 */
import ivm from 'isolated-vm';
import type { BundleValidation } from './bundle-validation.js';
import { BundleValidationError } from './errors.js';
import { describeCompileError, IsolateModules } from './module-loader.js';
import { DEFAULT_CPU_LIMIT_MS, DEFAULT_MEMORY_LIMIT_MB } from './version-isolate.js';

const REQUIRED_EXPORTS = ['upgradeState', 'upgradeContext'] as const;

export async function validateMigrationBundle(
  code: string,
  opts: { memoryLimitMb?: number; cpuLimitMs?: number } = {},
): Promise<BundleValidation> {
  const cpuLimitMs = opts.cpuLimitMs ?? DEFAULT_CPU_LIMIT_MS;
  const isolate = new ivm.Isolate({ memoryLimit: opts.memoryLimitMb ?? DEFAULT_MEMORY_LIMIT_MB });
  try {
    const context = await isolate.createContext();
    context.evalSync('globalThis.console = Object.freeze({ log() {}, info() {}, warn() {}, error() {}, debug() {}, trace() {} });');
    const modules = new IsolateModules(isolate, context);
    const bundle = modules.compileBundle(code);
    modules.instantiateBundle();
    await evaluate(bundle, cpuLimitMs);
    const missing = REQUIRED_EXPORTS.filter((name) => (bundle.namespace.getSync(name, { reference: true }) as ivm.Reference).typeof !== 'function');
    if (missing.length > 0) return { ok: false, error: `${missing.join(' and ')} must be ${missing.length > 1 ? 'exported functions' : 'an exported function'}` };
    return { ok: true, xstateMajor: 4 };
  } catch (e) {
    if (e instanceof BundleValidationError) return { ok: false, error: e.message };
    if (isolate.isDisposed) return { ok: false, error: "the bundle's top-level code exceeded the memory limit" };
    return { ok: false, error: `the bundle could not be loaded: ${describeCompileError(e)}` };
  } finally {
    if (!isolate.isDisposed) isolate.dispose();
  }
}

/** Top-level code may await: a promise that never settles must not hang the upload. */
async function evaluate(bundle: ivm.Module, cpuLimitMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BundleValidationError("the bundle's top-level code did not finish (top-level await never settled)")), cpuLimitMs + 5000);
  });
  try {
    await Promise.race([bundle.evaluate({ timeout: cpuLimitMs }), stuck]);
  } catch (e) {
    if (e instanceof BundleValidationError) throw e;
    if (e instanceof Error && /timed out/i.test(e.message)) throw new BundleValidationError(`the bundle's top-level code exceeded the CPU time limit of ${cpuLimitMs} ms`);
    throw new BundleValidationError(`the bundle threw while loading: ${describeCompileError(e)}`);
  } finally {
    clearTimeout(timer);
  }
}
