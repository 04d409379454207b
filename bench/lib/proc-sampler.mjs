// Samples the CPU time and resident memory of a process and its descendants (the server and its
// sandbox worker) from /proc while a scenario runs.
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let clockTicks;
const ticksPerSecond = () => {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
};

/** The process and its descendants, from /proc/<pid>/task/<tid>/children. */
export const family = (pid) => {
  const out = [pid];
  for (let i = 0; i < out.length && out.length < 64; i++) {
    try {
      for (const tid of readdirSync(`/proc/${out[i]}/task`)) {
        const children = readFileSync(`/proc/${out[i]}/task/${tid}/children`, 'utf8').trim();
        if (children) out.push(...children.split(/\s+/).map(Number));
      }
    } catch {
      // gone meanwhile
    }
  }
  return out;
};

/** Summed over the server and its descendants; undefined once the server is gone. */
const summed = (pid, read) => {
  const own = read(pid);
  if (own === undefined) return undefined;
  return family(pid)
    .slice(1)
    .reduce((total, child) => {
      const value = read(child);
      if (value === undefined) return total;
      return typeof total === 'number'
        ? total + value
        : { rssKb: total.rssKb + value.rssKb, hwmKb: total.hwmKb + value.hwmKb, anonKb: total.anonKb + value.anonKb };
    }, own);
};

/** utime + stime of one process in seconds, or undefined once it is gone. */
const ownCpuSeconds = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces; the fields after it start past the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond(); // fields 14 and 15 of the whole line
  } catch {
    return undefined;
  }
};

/** { rssKb, hwmKb } of one process from /proc/<pid>/status. */
const ownMemory = (pid) => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    // RssAnon: the process's own memory; the rest of VmRSS is mapped files (LMDB's pages, code), which
    // the kernel may drop and read again.
    return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM'), anonKb: kb('RssAnon') };
  } catch {
    return undefined;
  }
};

/** Host-wide busy and total jiffies from the first line of /proc/stat (all cores). */
const hostJiffies = () => {
  try {
    const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = values.map(Number);
    const busy = user + nice + system + irq + softirq + steal;
    return { busy, total: busy + idle + iowait };
  } catch {
    return undefined;
  }
};

const cpuSeconds = (pid) => summed(pid, ownCpuSeconds);

/** utime + stime of one thread (the main thread's tid is the pid). */
const threadCpuSeconds = (pid, tid) => ownCpuSeconds(`${pid}/task/${tid}`);

/** Seconds one thread spent runnable but waiting for a CPU (second field of /proc/<pid>/task/<tid>/schedstat). */
const threadWaitSeconds = (pid, tid) => {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
  } catch {
    return undefined;
  }
};

/**
 * Where the server's CPU goes: the node's main (JavaScript) thread, the node's other threads (LMDB's
 * writer, libuv, V8's GC helpers) and its descendants (the sandbox workers: the main one, and the
 * quarantine worker once an upload started it).
 */
const cpuSplit = (pid) => {
  const total = ownCpuSeconds(pid);
  const main = threadCpuSeconds(pid, pid);
  if (total === undefined || main === undefined) return undefined;
  const children = family(pid).slice(1);
  const descendants = children.reduce((sum, child) => sum + (ownCpuSeconds(child) ?? 0), 0);
  // How long the JavaScript threads that carry every event (the node's, the workers') were ready to
  // run but had no CPU: contention that CPU figures alone do not show. An idle worker adds nothing.
  return {
    main,
    nodeOther: total - main,
    worker: descendants,
    mainWaiting: threadWaitSeconds(pid, pid) ?? 0,
    workerWaiting: children.reduce((sum, child) => sum + (threadWaitSeconds(child, child) ?? 0), 0),
  };
};
const memory = (pid) => summed(pid, ownMemory);

export const startSampler = (pid, intervalMs = 250) => {
  const host0 = hostJiffies();
  const t0 = process.hrtime.bigint();
  const cpu0 = cpuSeconds(pid);
  const split0 = cpuSplit(pid);
  const mem0 = memory(pid);
  let last = { t: t0, cpu: cpu0 };
  let peakRssKb = mem0?.rssKb ?? 0;
  let peakAnonKb = mem0?.anonKb ?? 0;
  let peakIntervalCpu = 0;
  const samples = [];
  const sample = () => {
    const t = process.hrtime.bigint();
    const cpu = cpuSeconds(pid);
    const mem = memory(pid);
    if (cpu === undefined || mem === undefined) return;
    const dt = Number(t - last.t) / 1e9;
    const pct = dt > 0 ? ((cpu - last.cpu) / dt) * 100 : 0;
    peakIntervalCpu = Math.max(peakIntervalCpu, pct);
    peakRssKb = Math.max(peakRssKb, mem.rssKb);
    if (Number.isFinite(mem.anonKb)) peakAnonKb = Math.max(peakAnonKb, mem.anonKb);
    samples.push({ atS: Number(t - t0) / 1e9, cpuPct: Number(pct.toFixed(1)), rssMb: Number((mem.rssKb / 1024).toFixed(1)) });
    last = { t, cpu };
  };
  const timer = setInterval(sample, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      const wallS = Number(last.t - t0) / 1e9;
      const end = memory(pid);
      const split1 = cpuSplit(pid);
      const pctOf = (key) => (split0 && split1 && wallS > 0 ? Number((((split1[key] - split0[key]) / wallS) * 100).toFixed(1)) : null);
      const host1 = hostJiffies();
      // Busy cores over the window, whoever used them (server, generator, anything else on the host).
      const hostBusyCores = host0 && host1 && wallS > 0 ? (host1.busy - host0.busy) / ticksPerSecond() / wallS : null;
      const mb = (kb) => (Number.isFinite(kb) ? Number((kb / 1024).toFixed(1)) : null);
      return {
        wallS: Number(wallS.toFixed(3)),
        cpuSeconds: cpu0 === undefined ? null : Number((last.cpu - cpu0).toFixed(2)),
        cpuPct: cpu0 === undefined || wallS <= 0 ? null : Number((((last.cpu - cpu0) / wallS) * 100).toFixed(1)),
        peakIntervalCpuPct: Number(peakIntervalCpu.toFixed(1)),
        cpuSplitPct: { main: pctOf('main'), nodeOther: pctOf('nodeOther'), worker: pctOf('worker') },
        waitingForCpuPct: { main: pctOf('mainWaiting'), worker: pctOf('workerWaiting') },
        rssStartMb: mb(mem0?.rssKb),
        rssPeakMb: mb(peakRssKb),
        rssAnonPeakMb: mb(peakAnonKb),
        rssEndMb: mb(end?.rssKb),
        hwmMb: mb(end?.hwmKb),
        hostBusyCores: hostBusyCores === null ? null : Number(hostBusyCores.toFixed(2)),
        samples,
      };
    },
  };
};
