// Where a probe (bench/probes/) keeps its figures: bench/results/<name>-<time>.json, beside make bench's.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const resultsDir = fileURLToPath(new URL('../results', import.meta.url));

/** Writes `report` as JSON under bench/results, named by `name` and the time; returns the path. */
export const writeProbeReport = (name, report) => {
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
};
