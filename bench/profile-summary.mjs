// Summarises a V8 .cpuprofile: self time per function (name + file:line) and per file or package.
// CLI: node bench/profile-summary.mjs FILE.cpuprofile [TOP=15]
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';

const repoRoot = resolve(fileURLToPath(new URL('..', import.meta.url)));

const shortUrl = (url) => {
  if (!url) return '';
  let path = url.startsWith('file://') ? fileURLToPath(url) : url;
  if (path.startsWith(repoRoot + '/')) path = path.slice(repoRoot.length + 1);
  return path;
};

/** Where a frame's code lives: a package, a dist/ file, node internals, or native/V8. */
const moduleOf = (url) => {
  const path = shortUrl(url);
  if (!path) return '(native / V8)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (nm) return `node_modules/${nm[1]}`;
  if (path.startsWith('node:')) return 'node: internals';
  return path;
};

/**
 * `window` ({fromUs, toUs}, CLOCK_MONOTONIC µs like the profile's own timestamps) keeps only the samples
 * taken inside it; without it the whole profile counts.
 */
export const summarizeProfile = (file, top = 15, window = {}) => {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const fromUs = window.fromUs ?? -Infinity;
  const toUs = window.toUs ?? Infinity;
  let at = profile.startTime;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map();
  let totalUs = 0;
  for (let k = 0; k < profile.samples.length; k++) {
    const dt = profile.timeDeltas[k] ?? 0;
    at += dt;
    if (at < fromUs || at > toUs) continue;
    selfUs.set(profile.samples[k], (selfUs.get(profile.samples[k]) ?? 0) + dt);
    totalUs += dt;
  }
  const byFunction = new Map();
  const byModule = new Map();
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const where = url ? `${shortUrl(url)}:${lineNumber + 1}` : '';
    const key = `${functionName || '(anonymous)'}\u0000${where}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
    if (functionName === '(idle)') continue;
    const mod = functionName.startsWith('(') && !url ? functionName : moduleOf(url);
    byModule.set(mod, (byModule.get(mod) ?? 0) + us);
  }
  const idleUs = [...byFunction].filter(([key]) => key.startsWith('(idle)')).reduce((sum, [, us]) => sum + us, 0);
  const busyUs = totalUs - idleUs;
  const rows = (map, n) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([key, us]) => {
        const [name, where] = key.split('\u0000');
        return { name, where: where ?? '', selfMs: Number((us / 1000).toFixed(1)), pctOfBusy: Number(((us / busyUs) * 100).toFixed(1)) };
      });
  return {
    file,
    window: Number.isFinite(fromUs) ? { fromUs, toUs, profileStartUs: profile.startTime, profileEndUs: profile.endTime } : undefined,
    totalMs: Number((totalUs / 1000).toFixed(1)),
    busyMs: Number((busyUs / 1000).toFixed(1)),
    topFunctions: rows(new Map([...byFunction].filter(([key]) => !key.startsWith('(idle)'))), top),
    topModules: rows(byModule, top),
  };
};

export const profileMarkdown = (summary) => {
  const lines = [
    `Profile ${shortUrl(summary.file)}${summary.window ? ', measured phase only' : ''}: main thread busy ${summary.busyMs} ms of ` +
      `${summary.totalMs} ms sampled (${((summary.busyMs / summary.totalMs) * 100).toFixed(0)} %); percentages are of busy time.`,
    '',
    '| self ms | % | function | where |',
    '|---:|---:|---|---|',
    ...summary.topFunctions.map((r) => `| ${r.selfMs} | ${r.pctOfBusy} | \`${r.name}\` | ${r.where} |`),
    '',
    '| self ms | % | module |',
    '|---:|---:|---|',
    ...summary.topModules.map((r) => `| ${r.selfMs} | ${r.pctOfBusy} | ${r.name} |`),
  ];
  return lines.join('\n');
};

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node bench/profile-summary.mjs FILE.cpuprofile [TOP]');
    process.exit(2);
  }
  console.log(profileMarkdown(summarizeProfile(file, Number(top) || 15)));
}
