// `make cluster-up` / `make cluster-down`: N statehold nodes and their nats-servers on this host's
// loopback, each with its own ports and data dir under CLUSTER_DIR (default ./cluster-data). `up` prints
// the URLs and the operator key and returns, leaving the processes running; `down` stops every process
// `up` started (SIGTERM, then SIGKILL after 15 s) and leaves nothing running. Data stays unless WIPE=1.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, natsServerAvailable, startNatsServers } from './nats-servers.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const dir = resolve(process.env.CLUSTER_DIR ?? join(repoRoot, 'cluster-data'));
const statePath = join(dir, 'cluster.json');
const say = (line) => process.stdout.write(`cluster: ${line}\n`);

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const waitHealthy = async (url, ms) => {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} was not healthy within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
};

const up = async () => {
  if (existsSync(statePath) && JSON.parse(readFileSync(statePath, 'utf8')).pids.some(alive)) {
    throw new Error(`a cluster from ${statePath} is still running: make cluster-down first`);
  }
  if (!natsServerAvailable()) throw new Error('nats-server is not installed (apt-get install nats-server)');
  if (!existsSync(join(repoRoot, 'dist/bin/statehold.js'))) throw new Error('dist/bin/statehold.js is missing: make build');
  const nodeCount = Number(process.env.NODES ?? 3);
  const natsCount = Number(process.env.NATS ?? (nodeCount >= 3 ? 3 : 1));
  if (![1, 3].includes(natsCount)) throw new Error('NATS must be 1 or 3');
  mkdirSync(dir, { recursive: true });
  // Keys are made once per cluster dir and kept with it: a restarted cluster keeps its data readable.
  const secretsPath = join(dir, 'secrets.json');
  const secrets = existsSync(secretsPath)
    ? JSON.parse(readFileSync(secretsPath, 'utf8'))
    : { adminKey: `shadm_${randomBytes(32).toString('base64url')}`, masterKey: randomBytes(32).toString('base64') };
  writeFileSync(secretsPath, JSON.stringify(secrets), { mode: 0o600 });

  const nats = await startNatsServers({ count: natsCount, dir: join(dir, 'nats'), keep: true, detached: true, log: say });
  const pids = nats.servers.map((server) => server.process.pid);
  const state = { pids, nats: nats.urls, nodes: [] };
  writeFileSync(statePath, JSON.stringify(state, null, 2));
  for (let i = 1; i <= nodeCount; i++) {
    const id = `node-${i}`;
    const port = await freePort();
    const dataDir = join(dir, id);
    mkdirSync(dataDir, { recursive: true });
    const out = openSync(join(dir, `${id}.log`), 'a');
    const child = spawn(
      process.execPath,
      [
        '--no-node-snapshot',
        '--initial-old-space-size=160',
        join(repoRoot, 'dist/bin/statehold.js'),
        'node',
        '--nats',
        nats.urls.join(','),
        '--node-id',
        id,
        '--replicas',
        String(natsCount),
        '--port',
        String(port),
        '--data-dir',
        dataDir,
      ],
      {
        env: { ...process.env, STATEHOLD_ADMIN_KEY: secrets.adminKey, STATEHOLD_MASTER_KEY: secrets.masterKey },
        stdio: ['ignore', out, out],
        detached: true,
      },
    );
    child.unref();
    const url = `http://127.0.0.1:${port}`;
    state.pids.push(child.pid);
    state.nodes.push({ id, url, pid: child.pid, dataDir });
    writeFileSync(statePath, JSON.stringify(state, null, 2));
    await waitHealthy(url, 60_000);
    say(`${id} (pid ${child.pid}) at ${url}`);
  }
  say(`NATS: ${nats.urls.join(',')} (replicas ${natsCount})`);
  say(`operator key: ${secrets.adminKey}`);
  say(`  e.g. curl -H "Authorization: Bearer ${secrets.adminKey}" ${state.nodes[0].url}/orgs`);
  say(`logs and data in ${dir}; stop with make cluster-down`);
};

const down = async () => {
  if (!existsSync(statePath)) {
    say('no cluster to stop');
    return;
  }
  const state = JSON.parse(readFileSync(statePath, 'utf8'));
  // Nodes first (they drain and flush), then the NATS servers.
  const nodePids = state.nodes.map((node) => node.pid);
  const natsPids = state.pids.filter((pid) => !nodePids.includes(pid));
  for (const group of [nodePids, natsPids]) {
    for (const pid of group) if (alive(pid)) process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + 15_000;
    while (group.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    for (const pid of group) if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
  rmSync(statePath);
  if (process.env.WIPE === '1') rmSync(dir, { recursive: true, force: true });
  say(`stopped ${state.pids.length} processes${process.env.WIPE === '1' ? ' and removed their data' : ''}`);
};

const command = process.argv[2];
(command === 'up' ? up() : command === 'down' ? down() : Promise.reject(new Error('usage: launch.mjs up|down'))).catch((error) => {
  process.stderr.write(`cluster: ${error.message}\n`);
  process.exitCode = 1;
});
