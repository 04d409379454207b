// Summarises a system-wide `perf record -g` of a bench run: samples per thread, and for the busiest
// threads where their time goes, by the first JavaScript frame of each sample (the function that was
// running, or that called the native code that was), with the native leaf where no JS frame is.
// JS frames are named when the processes ran with --perf-basic-prof (bench/README.md, "Probes").
//
// CLI: perf script -i perf.data -F comm,pid,tid,ip,sym,dso > perf.txt
//      node bench/perf-summary.mjs perf.txt [THREADS=4] [TOP=20]
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';

const repoRoot = resolve(fileURLToPath(new URL('..', import.meta.url)));

/**
 * The samples of `perf script` text: { comm, pid, tid, frames (leaf first) }, and `ms` (the sample's time
 * in milliseconds) when the script was asked for `time` (-F comm,pid,tid,time,ip,sym,dso).
 */
export const parsePerfScript = (text) => {
  const samples = [];
  let current;
  for (const line of text.split('\n')) {
    if (line.trim() === '') {
      if (current) samples.push(current);
      current = undefined;
      continue;
    }
    if (!/^\s/.test(line)) {
      const head = /^\s*(\S.*?)\s+(\d+)\/(\d+)(?:\s+(\d+\.\d+):)?\s*$/.exec(line);
      current = head ? { comm: head[1], pid: Number(head[2]), tid: Number(head[3]), frames: [] } : undefined;
      if (current && head[4] !== undefined) current.ms = Math.round(Number(head[4]) * 1e6) / 1e3; // (to the µs perf gives)
      continue;
    }
    if (!current) continue;
    // "\t    7f31e005faac JS:*name file:///x.js:1:2 (/tmp/perf-1.map)": address, symbol, (dso)
    const frame = /^\s*[0-9a-f]+\s+(.*?)(?:\s+\(([^()]*)\))?\s*$/.exec(line);
    if (frame) current.frames.push({ sym: frame[1].replaceAll(`file://${repoRoot}/`, ''), dso: frame[2] ?? '' });
  }
  if (current) samples.push(current);
  return samples;
};

const isJs = (frame) => frame.sym.startsWith('JS:');
const jsName = (frame) => frame.sym.replace(/^JS:[*~^+-]?/, '');

/** Where a sample's time went: its first JS frame, or its native leaf (marked as such). */
export const placeOf = (sample) => {
  const js = sample.frames.find(isJs);
  if (js) return jsName(js);
  const leaf = sample.frames[0];
  if (!leaf) return '(no frames)';
  return `(native) ${leaf.sym}${leaf.dso.includes('kernel') ? ' [kernel]' : ''}`;
};

const percent = (n, total) => `${((100 * n) / total).toFixed(1)} %`;

export const summarizePerf = (samples, { threads = 4, top = 20 } = {}) => {
  const byThread = new Map();
  for (const sample of samples) {
    const key = `${sample.comm} ${sample.pid}/${sample.tid}`;
    const list = byThread.get(key) ?? [];
    list.push(sample);
    byThread.set(key, list);
  }
  const ranked = [...byThread.entries()].sort((a, b) => b[1].length - a[1].length);
  const lines = [`${samples.length} samples`, '', '| thread | samples | share |', '|---|---:|---:|'];
  for (const [key, list] of ranked.slice(0, 20)) lines.push(`| ${key} | ${list.length} | ${percent(list.length, samples.length)} |`);
  for (const [key, list] of ranked.slice(0, threads)) {
    if (key.startsWith('swapper')) continue;
    const places = new Map();
    for (const sample of list) {
      const place = placeOf(sample);
      places.set(place, (places.get(place) ?? 0) + 1);
    }
    lines.push(
      '',
      `**${key}**, ${list.length} samples: first JS frame (or native leaf)`,
      '',
      '| share of the thread | where |',
      '|---:|---|',
    );
    for (const [place, n] of [...places.entries()].sort((a, b) => b[1] - a[1]).slice(0, top))
      lines.push(`| ${percent(n, list.length)} | \`${place}\` |`);
  }
  return lines.join('\n');
};

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [file, threads = '4', top = '20'] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node bench/perf-summary.mjs PERF_SCRIPT_OUTPUT [THREADS=4] [TOP=20]\n');
    process.exit(2);
  }
  process.stdout.write(summarizePerf(parsePerfScript(readFileSync(file, 'utf8')), { threads: Number(threads), top: Number(top) }) + '\n');
}
