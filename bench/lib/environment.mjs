// Facts about the machine and the code under test, recorded with every result.
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, totalmem, release, loadavg } from 'node:os';
import { serverNodeArgs } from './server-process.mjs';

const git = (repoRoot, args) => {
  try {
    return execFileSync('git', args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    return undefined;
  }
};

export const describeEnvironment = (repoRoot) => ({
  commit: git(repoRoot, ['rev-parse', '--short', 'HEAD']) ?? 'unknown',
  branch: git(repoRoot, ['rev-parse', '--abbrev-ref', 'HEAD']),
  dirty: (git(repoRoot, ['status', '--porcelain', '--', 'src', 'package.json']) ?? '') !== '',
  node: process.version,
  nproc: availableParallelism(),
  cpuModel: cpus()[0]?.model?.trim() ?? 'unknown',
  memoryGb: Number((totalmem() / 2 ** 30).toFixed(1)),
  kernel: release(),
  loadAverageAtStart: loadavg().map((x) => Number(x.toFixed(2))),
  // The server inherits the environment: STATEHOLD_COMMIT_LOG=lmdb compares against LMDB-only commits.
  commitLog: process.env.STATEHOLD_COMMIT_LOG || 'wal',
  sandboxNodeArgs: process.env.STATEHOLD_SANDBOX_NODE_ARGS || undefined,
  serverNodeArgs: serverNodeArgs(repoRoot).join(' '),
});
