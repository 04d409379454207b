// Starts `statehold serve` as its own process on a fresh data dir and stops it with SIGTERM.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 40_000;

/**
 * The Node flags `statehold` runs the node with: those on the first line of bin/statehold.js (its
 * `#!/usr/bin/env -S node …`), so the bench measures the server as users start it.
 */
export const shimNodeArgs = (repoRoot) => {
  const first = readFileSync(join(repoRoot, 'bin/statehold.js'), 'utf8').split('\n', 1)[0];
  const match = /^#!\/usr\/bin\/env -S node((?: --[\w-]+(?:=\S+)?)*)$/.exec(first);
  if (!match) throw new Error(`bin/statehold.js: unexpected first line ${JSON.stringify(first)}`);
  return match[1].split(' ').filter(Boolean);
};

/**
 * The server's own Node flags: the shim's, then BENCH_SERVER_NODE_ARGS (more for the server's process,
 * not its sandbox workers, not the load generator; a later V8 flag wins), e.g. to compare GC settings.
 */
export const serverNodeArgs = (repoRoot) => [
  ...shimNodeArgs(repoRoot),
  ...(process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean),
];

export const startServer = async ({ repoRoot, adminKey, label, profileDir, args: extraArgs = [] }) => {
  const dataDir = mkdtempSync(join(tmpdir(), `statehold-bench-${label}-`));
  const nodeArgs = serverNodeArgs(repoRoot);
  let profileFile;
  if (profileDir) {
    mkdirSync(profileDir, { recursive: true });
    const name = `server-${label}-${Date.now()}.cpuprofile`;
    profileFile = join(profileDir, name);
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}`);
  }
  const args = [
    ...nodeArgs,
    join(repoRoot, 'dist/bin/statehold.js'),
    'serve',
    '--port',
    '0',
    '--data-dir',
    dataDir,
    '--admin-key',
    adminKey,
    ...extraArgs,
  ];
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  const stderrTail = [];
  child.stderr.on('data', (chunk) => {
    stderrTail.push(chunk.toString());
    if (stderrTail.length > 50) stderrTail.shift();
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(
      () => reject(new Error(`server did not start within ${START_TIMEOUT_MS} ms:\n${stderrTail.join('')}`)),
      START_TIMEOUT_MS,
    );
    child.stdout.on('data', (chunk) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited during start (code ${code}, signal ${signal}):\n${stderrTail.join('')}`));
    });
  });
  // BENCH_SERVER_STDOUT: keep what the server and its sandbox workers print (e.g. --trace-gc output) in
  // `<that path>.<scenario>`; by default it is read and dropped.
  if (process.env.BENCH_SERVER_STDOUT) child.stdout.pipe(createWriteStream(`${process.env.BENCH_SERVER_STDOUT}.${label}`));
  else child.stdout.resume();

  const stop = async ({ keepData = false } = {}) => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    const result = await exited;
    clearTimeout(timer);
    if (!keepData) rmSync(dataDir, { recursive: true, force: true });
    return { ...result, stderrTail: stderrTail.join('').slice(-4000) };
  };

  return { pid: child.pid, url, dataDir, stop, exited, profileFile };
};
