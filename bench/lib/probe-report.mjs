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

/**
 * Runs `runOnce(repo, round)` for each built checkout, round after round, the order reversed every
 * other round (the host drifts: neither build is always first); prints each run's figures and returns
 * them by checkout.
 */
export const alternatingRounds = async (repos, rounds, runOnce) => {
  const runs = Object.fromEntries(repos.map((repo) => [repo, []]));
  for (let round = 0; round < rounds; round++) {
    for (const repo of round % 2 === 0 ? repos : [...repos].reverse()) {
      const figures = await runOnce(repo, round);
      runs[repo].push(figures);
      console.log(`round ${round + 1} ${repo}: ${JSON.stringify(figures)}`);
    }
  }
  return runs;
};
