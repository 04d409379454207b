import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './paths.js';

export const entryPoint = join(repoRoot, 'dist', 'bin', 'statehold.js');
/** The `statehold` command as npm installs it: runs the built CLI with the node's flags (its first line). */
export const shim = join(repoRoot, 'bin', 'statehold.js');

export interface NodeProcess {
  url: string;
  port: number;
  dataDir: string;
  adminKey: string | undefined;
  child: ChildProcess;
  output: () => string;
  /** A cluster deployment's nodes, each on its own URL (for what is counted or limited per node). */
  nodes?: Array<{ url: string; port: number }>;
  /** Sends the signal and resolves with the exit code (or signal name). */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

export interface StartOptions {
  /** `serve` (the default) or `node` (a cluster node: give --nats, --node-id and STATEHOLD_MASTER_KEY). */
  command?: 'serve' | 'node';
  args?: string[];
  /** Node flags for the node's own process, before the entry point (not passed to its sandbox workers). */
  nodeArgs?: string[];
  env?: Record<string, string>;
  dataDir?: string;
  /** Pass no --admin-key, so the node generates one (or uses the stored one). */
  generatedAdminKey?: boolean;
  /** Start it through the shim, with the flags a user's `statehold serve` gets (nodeArgs ignored). */
  viaShim?: boolean;
  /**
   * Make the node the leader of a process group of its own (with its sandbox workers in it), so a test
   * can signal the whole group as systemd or a terminal does: process.kill(-node.child.pid, signal).
   */
  ownProcessGroup?: boolean;
  /** How long to wait for the node to listen (default 20 s); past it the node is killed and the start fails. */
  startTimeoutMs?: number;
  /**
   * The largest file the node may write, in MiB (`ulimit -f`, with SIGXFSZ ignored): a write past it fails
   * with EFBIG, as one on a full disk fails with ENOSPC. The write-ahead log's segments need 32 MiB each.
   */
  fileSizeLimitMib?: number;
}

/**
 * How long a `statehold node` of a test is given to listen: it waits up to 60 s for JetStream first
 * (cluster-node.ts JETSTREAM_WAIT_MS), and nats-servers just started or restarted on a loaded host can
 * take that long to elect their leaders.
 */
export const CLUSTER_NODE_START_MS = 75_000;

export const tempDataDir = (): string => mkdtempSync(join(tmpdir(), 'statehold-test-'));

/**
 * Which deployment the drop-in suites run against: `embedded` (one `statehold serve`), or `cluster`
 * when STATEHOLD_TEST_DEPLOYMENT=cluster (three `statehold node` processes on three nats-servers with
 * R3, behind a proxy that sends each request to the next node: cluster-deployment.ts).
 */
export const testDeployment: 'embedded' | 'cluster' = process.env.STATEHOLD_TEST_DEPLOYMENT === 'cluster' ? 'cluster' : 'embedded';

/** For a test that checks what only one deployment has (an LMDB file, a fault hook): tap's `skip` option. */
export const onlyEmbedded = (why: string): { skip: string | false } => ({
  skip: testDeployment === 'cluster' ? `embedded node only: ${why}` : false,
});

/**
 * Starts `statehold serve` as a user would (or, in the cluster deployment, a whole cluster that
 * answers on one URL) and waits for it to say where it listens.
 */
export const startNode = async (options: StartOptions = {}): Promise<NodeProcess> => {
  if (testDeployment === 'cluster' && (options.command ?? 'serve') === 'serve') {
    const { startClusterDeployment } = await import('./cluster-deployment.js');
    return startClusterDeployment(options);
  }
  return startNodeProcess(options);
};

/**
 * The environment without what tap adds to NODE_OPTIONS for every process a test starts (its processinfo
 * hook, for coverage, which this suite does not take): loaded in a node and again in each sandbox worker it
 * forks, it doubled a node's start (≈ 450 → 880 ms to listening, measured here) for nothing.
 */
const withoutTapHooks = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const options = (env.NODE_OPTIONS ?? '')
    .split(/\s+/)
    .filter((option) => option !== '' && !option.includes('@tapjs/processinfo'))
    .join(' ');
  return { ...env, NODE_OPTIONS: options };
};

/** Starts one `statehold serve` or `statehold node` process on a free loopback port. */
export const startNodeProcess = async (options: StartOptions = {}): Promise<NodeProcess> => {
  const dataDir = options.dataDir ?? tempDataDir();
  const adminKey = options.generatedAdminKey ? undefined : `test-admin-${Math.random().toString(36).slice(2)}`;
  const serveArgs = [
    options.command ?? 'serve',
    '--port',
    '0',
    '--data-dir',
    dataDir,
    ...(adminKey ? ['--admin-key', adminKey] : []),
    ...(options.args ?? []),
  ];
  const [plainCommand, plainArgs] = options.viaShim
    ? [shim, serveArgs]
    : [process.execPath, ['--no-node-snapshot', ...(options.nodeArgs ?? []), entryPoint, ...serveArgs]];
  // (sh's ulimit -f counts 512-byte blocks)
  const [command, args] =
    options.fileSizeLimitMib === undefined
      ? [plainCommand, plainArgs]
      : ['/bin/sh', ['-c', `trap '' XFSZ; ulimit -f ${options.fileSizeLimitMib * 2048}; exec "$0" "$@"`, plainCommand, ...plainArgs]];
  const child = spawn(command, args, {
    env: { ...withoutTapHooks(process.env), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup === true,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));

  const port = await new Promise<number>((resolve, reject) => {
    const timeoutMs = options.startTimeoutMs ?? 20_000;
    const timer = setTimeout(() => {
      // Not left running: it would hold the data dir (and its port) for nobody.
      child.kill('SIGKILL');
      reject(new Error(`node did not start in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const check = () => {
      const match = /listening on http:\/\/[^:]+:(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    };
    child.stdout?.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`node exited (${code}) before listening:\n${output}`));
    });
  });

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    adminKey,
    child,
    output: () => output,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      // (a node that does not exit within a minute is killed: the test's teardown must end; its output says why)
      const backstop = setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }, STOP_BACKSTOP_MS);
      const code = await exited;
      clearTimeout(backstop);
      // A data dir this helper made goes with the node (its write-ahead log alone is 32 MiB or more);
      // one the test gave is the test's to keep or remove.
      if (options.dataDir === undefined) removeDir(dataDir);
      return code;
    },
  };
};

/** How long a stopped node may take to exit before the helper kills it. */
const STOP_BACKSTOP_MS = 60_000;

export const removeDir = (dir: string): void => rmSync(dir, { recursive: true, force: true });
