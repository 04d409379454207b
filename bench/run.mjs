// Benchmark driver: for each scenario, starts a fresh `statehold serve` process, uploads the cart machine,
// runs bench/load-generator.mjs as a separate process, samples the server's CPU and memory while the
// measured phase runs, verifies every instance's history, and writes bench/results/. Knobs: bench/README.md.
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from './lib/config.mjs';
import { describeEnvironment } from './lib/environment.mjs';
import { startServer } from './lib/server-process.mjs';
import { startSampler } from './lib/proc-sampler.mjs';
import { setupMachine } from './lib/setup-machine.mjs';
import { verifyScenario } from './lib/verify.mjs';
import { writeReport } from './lib/report.mjs';
import { MACHINE_NAME } from './lib/cart-machine.mjs';
import { summarizeProfile } from './profile-summary.mjs';
import { runNeighbours } from './lib/neighbours.mjs';
import { instancesFailed, runInstances } from './lib/instances.mjs';
import { realtimeFailed, runRealtime } from './lib/realtime.mjs';
import { runCluster } from './lib/cluster.mjs';
import { clusterFailed } from './lib/cluster-figures.mjs';
import { indexesFailed, runIndexes } from './lib/indexes.mjs';
import { runYardstick, yardstickFailed } from './lib/yardstick.mjs';

const benchDir = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = resolve(benchDir, '..');
const resultsDir = join(benchDir, 'results');
const profileDir = join(resultsDir, 'prof');

const log = (...args) => console.error('bench:', ...args);

/** Runs the load generator process; resolves with its result, sampling the server during 'measure'. */
const runGenerator = ({ url, token, prefix, scenario, serverPid, sampleMs }) =>
  new Promise((resolvePromise) => {
    const params = { url, token, machine: MACHINE_NAME, prefix, scenario };
    const child = fork(join(benchDir, 'load-generator.mjs'), [JSON.stringify(params)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv: [],
    });
    let sampler;
    let server;
    let result;
    const window = {};
    const budgetS = scenario.capS * 2 + 120; // create + warmup + measure + drain, each bounded
    const watchdog = setTimeout(() => {
      log(`${scenario.id}: generator exceeded ${budgetS} s, killing it`);
      child.kill('SIGKILL');
    }, budgetS * 1000);
    child.on('message', (message) => {
      if (message.type === 'phase') {
        log(`${scenario.id}: ${message.phase}`);
        if (message.phase === 'measure') {
          sampler = startSampler(serverPid, sampleMs);
          window.fromUs = message.monoUs;
        }
        if (message.phase === 'measured' && sampler) {
          server = sampler.stop();
          window.toUs = message.monoUs;
        }
      } else if (message.type === 'result') {
        result = message.result;
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(watchdog);
      if (sampler && !server) server = sampler.stop();
      if (!result) result = { error: `generator exited (code ${code}, signal ${signal}) without a result` };
      resolvePromise({ ...result, server, measuredWindowUs: window });
    });
  });

const runScenario = async (scenario, config) => {
  const label = scenario.id;
  const server = await startServer({ repoRoot, adminKey: config.adminKey, label, profileDir: config.profile ? profileDir : undefined });
  log(`${label}: server pid ${server.pid} at ${server.url}`);
  let outcome = { scenario };
  try {
    const { token } = await setupMachine({ url: server.url, adminKey: config.adminKey, machine: MACHINE_NAME });
    const prefix = `${label}-i`;
    const generated = await runGenerator({ url: server.url, token, prefix, scenario, serverPid: server.pid, sampleMs: config.sampleMs });
    const { log: instanceLog, ...figures } = generated;
    outcome = { scenario, ...figures };
    if (instanceLog) {
      log(`${label}: verifying ${instanceLog.length} histories`);
      outcome.verify = await verifyScenario({
        url: server.url,
        adminKey: config.adminKey,
        machine: MACHINE_NAME,
        prefix,
        log: instanceLog,
      });
    }
  } catch (err) {
    outcome.error = String(err?.stack ?? err);
  } finally {
    const stopped = await server.stop({ keepData: config.keepData });
    outcome.serverExit = { code: stopped.code, signal: stopped.signal };
    if (stopped.code !== 0) outcome.serverStderrTail = stopped.stderrTail;
    if (config.keepData) outcome.dataDir = server.dataDir;
  }
  if (server.profileFile) {
    if (existsSync(server.profileFile)) outcome.profile = summarizeProfile(server.profileFile, 15, outcome.measuredWindowUs);
    else outcome.profileMissing = server.profileFile;
  }
  return outcome;
};

/** Org B may not see a single failed request, alone or beside org A. */
const neighboursFailed = (r) =>
  Object.keys({ ...r.neighbours.alone.b.statusCounts, ...r.neighbours.beside.b.statusCounts }).some((key) => key !== '200');

const main = async () => {
  const config = loadConfig();
  if (!existsSync(join(repoRoot, 'dist/bin/statehold.js'))) throw new Error('dist/bin/statehold.js is missing: run `make build` first');
  const report = {
    startedAt: new Date().toISOString(),
    env: describeEnvironment(repoRoot),
    config: { ...config, adminKey: undefined },
    scenarios: [],
  };
  const t0 = Date.now();
  for (const scenario of config.scenarios) {
    log(`${scenario.id}: starting`);
    if (scenario.kind === 'neighbours') {
      report.scenarios.push(
        await runNeighbours(scenario, config, { startServer, repoRoot, log }).catch((err) => ({
          scenario,
          error: String(err?.stack ?? err),
        })),
      );
      continue;
    }
    if (scenario.kind === 'instances') {
      report.scenarios.push(
        await runInstances(scenario, config, { startServer, repoRoot, log }).catch((err) => ({
          scenario,
          error: String(err?.stack ?? err),
        })),
      );
      continue;
    }
    if (scenario.kind === 'realtime') {
      report.scenarios.push(
        await runRealtime(scenario, config, { startServer, repoRoot, log }).catch((err) => ({
          scenario,
          error: String(err?.stack ?? err),
        })),
      );
      continue;
    }
    if (scenario.kind === 'cluster') {
      report.scenarios.push(
        await runCluster(scenario, config, { startServer, repoRoot, log }).catch((err) => ({ scenario, error: String(err?.stack ?? err) })),
      );
      continue;
    }
    if (scenario.kind === 'indexes') {
      report.scenarios.push(
        await runIndexes(scenario, config, { startServer, repoRoot, log }).catch((err) => ({ scenario, error: String(err?.stack ?? err) })),
      );
      continue;
    }
    if (scenario.kind === 'yardstick') {
      report.scenarios.push(
        await runYardstick(scenario, config, { startServer, repoRoot, log }).catch((err) => ({
          scenario,
          error: String(err?.stack ?? err),
        })),
      );
      continue;
    }
    report.scenarios.push(await runScenario(scenario, config));
  }
  report.wallS = (Date.now() - t0) / 1000;
  const { jsonPath, markdown } = writeReport(resultsDir, report);
  process.stdout.write(markdown);
  log(`wrote ${jsonPath} and ${join(resultsDir, 'latest.md')} in ${report.wallS} s`);
  const failedKind = {
    neighbours: neighboursFailed,
    instances: instancesFailed,
    realtime: realtimeFailed,
    cluster: clusterFailed,
    indexes: indexesFailed,
    yardstick: yardstickFailed,
  };
  const failed = report.scenarios.filter(
    (r) => r.error || (failedKind[r.scenario.kind] ?? ((x) => !x.verify?.ok || x.stateMismatches > 0))(r),
  );
  if (failed.length > 0) {
    log(`FAILED: ${failed.map((r) => r.scenario.id).join(', ')}`);
    process.exitCode = 1;
  }
};

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
