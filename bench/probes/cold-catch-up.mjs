// Probe: how fast a node catches up partitions it held none of (a failover without standbys, a node
// replaced with an empty data dir). One node on one nats-server (cluster/launch.mjs under PROBE_DIR),
// PROBE_INSTANCES instances made and PROBE_EVENTS events sent; then the node is stopped, its data dir
// emptied, and it is started again on the same streams: the time until /health answers 200 is the time
// to catch up every partition from its start. PROBE_ROUNDS rounds, each restarting the node from every
// build in PROBE_BUILDS (repository roots, comma-separated; this one by default) in turn, so builds are
// compared on one stream in one run. PROBE_CPU_PROF=1 writes each restarted node's CPU profile under
// PROBE_DIR/prof.
//   node bench/probes/cold-catch-up.mjs
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInstances, sendEvents, withProbeCluster } from '../lib/probe-cluster.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const dir = process.env.PROBE_DIR ?? '/tmp/probe-catch-up';
const instances = Number(process.env.PROBE_INSTANCES ?? 3000);
const events = Number(process.env.PROBE_EVENTS ?? 30_000);
const rounds = Number(process.env.PROBE_ROUNDS ?? 1);
/** Repository roots whose builds are restarted in turn each round (`dist/bin/statehold.js` in each). */
const builds = (process.env.PROBE_BUILDS ?? repoRoot).split(',');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const healthy = async (url) => {
  try {
    return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(1_000) })).status === 200;
  } catch {
    return false;
  }
};

await withProbeCluster({ dir, nodes: 1 }, async ({ state, urls, post }) => {
  const loadStarted = performance.now();
  const statuses = {};
  const checked = (status) => (statuses[status] = (statuses[status] ?? 0) + 1);
  await createInstances({ urls, post, instances, checked });
  await sendEvents({ urls, post, instances, events, concurrency: 32, checked });
  console.log(
    `load: ${instances} creates and ${events} events in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s, answers ${JSON.stringify(statuses)}`,
  );

  const [node] = state.nodes;
  const secrets = JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8'));
  const port = new URL(node.url).port;
  const entries = instances + events;
  let running = { pid: node.pid };
  const stopRunning = async () => {
    try {
      process.kill(running.pid, 'SIGTERM');
    } catch {
      return;
    }
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(50)) {
      try {
        process.kill(running.pid, 0);
      } catch {
        return;
      }
    }
    process.kill(running.pid, 'SIGKILL');
  };
  for (let round = 0; round < rounds; round++) {
    for (const build of builds) {
      await stopRunning();
      rmSync(node.dataDir, { recursive: true, force: true });
      mkdirSync(node.dataDir, { recursive: true });
      const flags = process.env.PROBE_CPU_PROF === '1' ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, 'prof')}`] : [];
      const out = openSync(join(dir, 'restarted.log'), 'a');
      const startedAt = performance.now();
      const child = spawn(
        process.execPath,
        [
          '--no-node-snapshot',
          ...flags,
          join(build, 'dist/bin/statehold.js'),
          'node',
          '--nats',
          state.nats.join(','),
          '--node-id',
          node.id,
        ].concat(['--replicas', '1', '--port', port, '--data-dir', node.dataDir]),
        {
          env: { ...process.env, STATEHOLD_ADMIN_KEY: secrets.adminKey, STATEHOLD_MASTER_KEY: secrets.masterKey },
          stdio: ['ignore', out, out],
        },
      );
      running = { pid: child.pid };
      while (!(await healthy(node.url))) {
        if (child.exitCode !== null) throw new Error(`the restarted node exited (${child.exitCode}); see ${join(dir, 'restarted.log')}`);
        if (performance.now() - startedAt > 600_000) throw new Error('not healthy within 600 s');
        await sleep(20);
      }
      const seconds = (performance.now() - startedAt) / 1000;
      const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      const cpu = (Number(stat[11]) + Number(stat[12])) / 100;
      console.log(
        `round ${round + 1}, ${build}: cold catch-up of ${entries} entries: healthy after ${seconds.toFixed(2)} s (${Math.round(entries / seconds)} entries/s), main process CPU ${cpu.toFixed(2)} s (${Math.round((cpu * 1e6) / entries)} µs per entry)`,
      );
    }
  }
  await stopRunning();
});
