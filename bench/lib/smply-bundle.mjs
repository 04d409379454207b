// Machine code as `smply` 0.1.18 uploads it (wire-protocol §7.3): esbuild, bundle, browser platform, ESM,
// minified with kept names, production defines, xstate bundled in. The tests' bundleLikeSmply
// (test/helpers/bundle.ts) calls it once it has mapped the service's import spellings.
import { build } from 'esbuild';

/** `source` bundled as smply would; `alias` maps an import to another package (xstate 5 is `xstate5` here). */
export const bundleAsSmply = async (source, repoRoot, alias = {}) => {
  const out = await build({
    stdin: { contents: source, resolveDir: repoRoot, loader: 'js' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    minify: true,
    keepNames: true,
    legalComments: 'none',
    define: { 'process.env.NODE_ENV': '"production"' },
    drop: ['debugger'],
    alias,
    write: false,
    logLevel: 'silent',
  });
  return out.outputFiles[0].text;
};
