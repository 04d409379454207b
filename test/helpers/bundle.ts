import { bundleAsSmply } from '../../bench/lib/smply-bundle.mjs';
import { repoRoot } from './paths.js';

/**
 * Machine code as `smply` 0.1.18 uploads it (wire-protocol §7.3): esbuild, bundle, browser platform,
 * ESM, minified with kept names, xstate bundled in. Imports the service would resolve (`npm:xstate`,
 * `xstate@5`, `npm:xstate@5`) are taken from this repository's node_modules instead (`xstate`, `xstate5`);
 * with `xstate5`, a plain `xstate` import is xstate 5 too.
 */
export async function bundleLikeSmply(code: string, options: { xstate5?: boolean } = {}): Promise<string> {
  const local = (options.xstate5 ? code.replace(/(['"])xstate(\/[^'"]*)?\1/g, '$1xstate5$2$1') : code)
    .replace(/(['"])(?:npm:)?xstate@5(\/[^'"]*)?\1/g, '$1xstate5$2$1')
    .replace(/(['"])npm:xstate(\/[^'"]*)?\1/g, options.xstate5 ? '$1xstate5$2$1' : '$1xstate$2$1');
  const text: string = await bundleAsSmply(local, repoRoot);
  if (/from\s*["'](npm:)?xstate/.test(text)) throw new Error('bundleLikeSmply: xstate was left as an import');
  return text;
}
