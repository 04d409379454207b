import { readdirSync, readFileSync } from 'node:fs';
import type { NodeProcess } from './node-process.js';

/** The node's sandbox workers of a role ('main' or 'quarantine'), from /proc, oldest first. */
export const workerPids = (node: NodeProcess, role: string): number[] => {
  const found: { pid: number; startedAt: number }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      // Field 22 of stat (the 20th after the command): start time in clock ticks since boot.
      if (ppid === node.child.pid && argv.some((a) => a.endsWith('sandbox-worker.js')) && argv.includes(role))
        found.push({ pid: Number(entry), startedAt: Number(fields[19]) });
    } catch {
      // the process ended while we looked
    }
  }
  return found.sort((a, b) => a.startedAt - b.startedAt || a.pid - b.pid).map((w) => w.pid);
};

/**
 * The node's sandbox worker of a role: the oldest, which is the one in use (a main worker's standby is
 * forked after it; a retired worker, older still, lives only until its last call ends), or undefined.
 */
export const workerPid = (node: NodeProcess, role: string): number | undefined => workerPids(node, role)[0];

/**
 * Node flags for tests whose machine code crashes its sandbox worker with a memory bomb
 * (crashOnBoomMachine's `new Array(2 ** 30).fill(0)`): the smallest isolate heap (16 MB, plus 1 MB for
 * live actors). A bomb takes as long to abort V8 as V8 thrashes before it gives up at the heap limit:
 * ≈ 0.3–1.5 s at 16 + 1 MB, against ≈ 2–7 s at 128 + 16 and ≈ 8 s at the default 128 + 128 on a 2-core
 * host, for every crash. Not every size gives up at all: on this Node the bomb thrashed for 30 s and
 * more at 16 + 3, 16 + 4, 16 + 8, 24 + 1 and 32 + 16 MB (a heap limit just past what one growth of its
 * element dictionary needs), while 16 + 1, 16 + 2, 16 + 16 and 32 + 1 aborted at once. The machines
 * such tests run besides the bomb are small counters, which 16 MB holds.
 */
export const smallHeapArgs = ['--isolate-memory-mb', '16', '--live-actor-memory-mb', '1'];
