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
      if (ppid === node.child.pid && argv.some((a) => a.endsWith('sandbox-worker.js')) && argv.includes(role)) found.push({ pid: Number(entry), startedAt: Number(fields[19]) });
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
