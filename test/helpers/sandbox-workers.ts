import { readdirSync, readFileSync } from 'node:fs';
import type { NodeProcess } from './node-process.js';

/** The node's sandbox worker of a role ('main' or 'quarantine'), from /proc: its pid, or undefined. */
export const workerPid = (node: NodeProcess, role: string): number | undefined => {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (ppid === node.child.pid && argv.some((a) => a.endsWith('sandbox-worker.js')) && argv.includes(role)) return Number(entry);
    } catch {
      // the process ended while we looked
    }
  }
  return undefined;
};
