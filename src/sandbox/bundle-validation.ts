/**
 * Upload-time check of a machine version bundle: the same loading path as serving it (so whatever
 * validates also runs), in a throw-away isolate.
 */
import { BundleValidationError, MachineCodeError, SandboxMemoryError, SandboxTimeoutError } from './errors.js';
import type { CapturedLog } from './types.js';
import { type MigrationInput, type MigrationOutput, VersionIsolate } from './version-isolate.js';

export type BundleValidation = { ok: true; xstateMajor: 4 | 5 } | { ok: false; error: string };

type IsolateLimits = { memoryLimitMb?: number; cpuLimitMs?: number };

export async function validateBundle(code: string, opts: IsolateLimits = {}): Promise<BundleValidation> {
  return checked(code, 'version', opts, (vi) => ({ ok: true, xstateMajor: vi.info.machine === 'v5' ? 5 : 4 }));
}

/** Upload-time check of a migration bundle: it loads, and exports upgradeState and upgradeContext. */
export async function validateMigrationBundle(
  code: string,
  opts: IsolateLimits = {},
): Promise<{ ok: true } | { ok: false; error: string }> {
  return checked(code, 'migration', opts, () => ({ ok: true }));
}

/**
 * Runs one migration over an instance's paths and context, in a throw-away isolate (an upgrade is
 * rare; a migration's code is trusted no more than a version's). Machine code errors propagate.
 */
export async function runMigration(
  code: string,
  input: MigrationInput,
  opts: IsolateLimits & { onLog?: (entry: CapturedLog) => void } = {},
): Promise<MigrationOutput> {
  const vi = await VersionIsolate.load({ versionId: 'migration', code, kind: 'migration', ...opts });
  try {
    return vi.migrate(input);
  } finally {
    vi.dispose();
  }
}

async function checked<T>(
  code: string,
  kind: 'version' | 'migration',
  opts: IsolateLimits,
  ok: (vi: VersionIsolate) => T,
): Promise<T | { ok: false; error: string }> {
  let vi: VersionIsolate | undefined;
  try {
    vi = await VersionIsolate.load({ versionId: 'validation', code, kind, ...opts });
    return ok(vi);
  } catch (e) {
    if (e instanceof BundleValidationError) return { ok: false, error: e.message };
    if (e instanceof SandboxMemoryError)
      return { ok: false, error: `the bundle's top-level code ${e.message.replace(/^machine code /, '')}` };
    // Whatever else the bundle's own code makes fail is the bundle's problem too, not the node's.
    if (e instanceof MachineCodeError || e instanceof SandboxTimeoutError)
      return { ok: false, error: `the bundle could not be loaded: ${e.message}` };
    throw e;
  } finally {
    vi?.dispose();
  }
}
