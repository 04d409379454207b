/**
 * Upload-time check of a machine version bundle: the same loading path as serving it (so whatever
 * validates also runs), in a throw-away isolate.
 */
import { BundleValidationError, MachineCodeError, SandboxMemoryError, SandboxTimeoutError } from './errors.js';
import { VersionIsolate } from './version-isolate.js';

export type BundleValidation = { ok: true; xstateMajor: 4 | 5 } | { ok: false; error: string };

export async function validateBundle(
  code: string,
  opts: { memoryLimitMb?: number; cpuLimitMs?: number } = {},
): Promise<BundleValidation> {
  let vi: VersionIsolate | undefined;
  try {
    vi = await VersionIsolate.load({ versionId: 'validation', code, ...opts });
    return { ok: true, xstateMajor: vi.info.machine === 'v5' ? 5 : 4 };
  } catch (e) {
    if (e instanceof BundleValidationError) return { ok: false, error: e.message };
    if (e instanceof SandboxMemoryError) return { ok: false, error: `the bundle's top-level code ${e.message.replace(/^machine code /, '')}` };
    // Whatever else the bundle's own code makes fail is the bundle's problem too, not the node's.
    if (e instanceof MachineCodeError || e instanceof SandboxTimeoutError) return { ok: false, error: `the bundle could not be loaded: ${e.message}` };
    throw e;
  } finally {
    vi?.dispose();
  }
}
