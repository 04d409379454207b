// The "yardstick" scenario (issue 38): Statehold against what a typical developer writes instead of it,
// in the same run on this host. The yardstick (../shared/yardstick: fastify 5 + xstate 5, one actor per
// key in memory, each event's snapshot UPSERTed into PostgreSQL before the answer) is started with its
// own start.sh; Statehold is started fresh with each arm's server arguments. Both get the same counter
// (one state, INC adds `by` to the count), K counters created, a warm-up, then closed loops at C=64 and
// C=1 from the same load code in a forked process (yardstick-load.mjs); R rounds, the targets' order
// alternating. Reported: medians over rounds, each round's own Statehold ÷ yardstick ratios, the CPU
// per acknowledged event of every process on each side (from /proc), and the issue's aims (printed,
// not asserted). Every counter is read back at the end of each target's round: its count must be the
// sum of its acknowledged INCs.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { family, startSampler } from './proc-sampler.mjs';
import { bundleAsSmply } from './smply-bundle.mjs';
import { alive } from './cluster.mjs';
import { setupMachine } from './setup-machine.mjs';
import { freePort } from '../../cluster/nats-servers.mjs';
import { startForked } from './forked-driver.mjs';
import { failureText, int } from './markdown-format.mjs';

const LOAD_SCRIPT = fileURLToPath(new URL('./yardstick-load.mjs', import.meta.url));
const MACHINE = 'counter';
const CREATE_CONCURRENCY = 16;
// The first start may install PostgreSQL (apt-get) and the service's npm packages.
const YARDSTICK_START_TIMEOUT_MS = 600_000;
const YARDSTICK_STOP_TIMEOUT_MS = 60_000;

/**
 * The counter as a user writes it for Statehold: the yardstick's machine (one state, INC adds `by`,
 * default 1, to the count), its count in `context.public` so that every answer carries it as the
 * yardstick's answers do, and authorizers that allow everything.
 */
export const COUNTER_SOURCES = {
  5: `import { createMachine, assign } from 'xstate';
export default createMachine({
  id: 'counter',
  initial: 'active',
  context: { public: { count: 0 } },
  states: {
    active: {
      on: { INC: { actions: assign({ public: ({ context, event }) => ({ count: context.public.count + (Number(event.by) || 1) }) }) } },
    },
  },
});
export const allowRead = () => true;
export const allowWrite = () => true;`,
  4: `import { createMachine, assign } from 'xstate';
export default createMachine({
  id: 'counter',
  initial: 'active',
  predictableActionArguments: true,
  context: { public: { count: 0 } },
  states: {
    active: { on: { INC: { actions: assign({ public: (context, event) => ({ count: context.public.count + (Number(event.by) || 1) }) }) } } },
  },
});
export const allowRead = () => true;
export const allowWrite = () => true;`,
};

/** The counter bundled with xstate inside, as smply 0.1.18 builds an upload (esbuild, the same options). */
export const yardstickCounterCode = (xstateMajor, repoRoot) =>
  bundleAsSmply(
    COUNTER_SOURCES[xstateMajor],
    repoRoot,
    // the repository has xstate 4 as `xstate` and xstate 5 as `xstate5`
    xstateMajor === 5 ? { xstate: dirname(createRequire(join(repoRoot, 'package.json')).resolve('xstate5/package.json')) } : {},
  );

/**
 * BENCH_YARDSTICK_STATEHOLD: `;`-separated arms, each `label[@repoRoot]=extra server args` (args split on
 * spaces; repoRoot another checkout's root, built, whose dist/bin/statehold.js is run). `statehold=` is
 * this checkout with no extra argument.
 */
export const parseArms = (text) => {
  const arms = [];
  for (const part of String(text).split(';')) {
    const spec = part.trim();
    if (!spec) continue;
    const eq = spec.indexOf('=');
    if (eq < 0) throw new Error(`BENCH_YARDSTICK_STATEHOLD: "${spec}" is not label[@repoRoot]=args`);
    const head = spec.slice(0, eq).trim();
    const at = head.indexOf('@');
    const label = (at < 0 ? head : head.slice(0, at)).trim();
    const root = at < 0 ? undefined : head.slice(at + 1).trim();
    if (!/^[\w.-]+$/.test(label)) throw new Error(`BENCH_YARDSTICK_STATEHOLD: bad label "${label}" (letters, digits, _ . -)`);
    if (label === 'yardstick') throw new Error('BENCH_YARDSTICK_STATEHOLD: "yardstick" names the yardstick itself');
    if (arms.some((a) => a.label === label)) throw new Error(`BENCH_YARDSTICK_STATEHOLD: label "${label}" twice`);
    if (root === '') throw new Error(`BENCH_YARDSTICK_STATEHOLD: "${spec}" has an empty repoRoot after @`);
    arms.push({
      label,
      ...(root === undefined ? {} : { repoRoot: resolve(root) }),
      args: spec
        .slice(eq + 1)
        .split(/\s+/)
        .filter(Boolean),
    });
  }
  if (arms.length === 0) throw new Error('BENCH_YARDSTICK_STATEHOLD: no arm');
  return arms;
};

/** Round r's order: the yardstick, then the arms; reversed every other round. */
export const roundOrder = (labels, round) => {
  const order = ['yardstick', ...labels];
  return round % 2 === 1 ? order : order.reverse();
};

export const median = (values) => {
  const sorted = values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const ratio = (a, b) => (typeof a !== 'number' || typeof b !== 'number' || b === 0 ? null : Number((a / b).toFixed(3)));
const PHASES = ['c64', 'c1'];

/**
 * Medians over rounds per target and phase, and per arm each round's own arm ÷ yardstick ratios (the
 * two ran minutes apart at most, so the ratio cancels much of the host's drift) with their medians.
 */
export const summarizeRounds = (rounds, labels) => {
  const side = (label) =>
    Object.fromEntries(
      PHASES.map((phase) => {
        const loops = rounds.map((r) => r.targets?.[label]?.[phase]).filter(Boolean);
        const of = (pick) => median(loops.map(pick));
        const parts = [...new Set(loops.flatMap((l) => Object.keys(l.cpuUs ?? {})))];
        return [
          phase,
          {
            rounds: loops.length,
            perSecond: of((l) => l.throughput),
            p50: of((l) => l.latencyMs?.p50),
            p90: of((l) => l.latencyMs?.p90),
            p99: of((l) => l.latencyMs?.p99),
            max: of((l) => l.latencyMs?.max),
            cpuUs: Object.fromEntries(parts.map((part) => [part, of((l) => l.cpuUs?.[part])])),
            generatorUs: of((l) => l.generatorUs),
            hostBusyCores: of((l) => l.hostBusyCores),
          },
        ];
      }),
    );
  const targets = Object.fromEntries(['yardstick', ...labels].map((label) => [label, side(label)]));
  const paired = Object.fromEntries(
    labels.map((label) => {
      const perRound = rounds.map((r) => {
        const a = r.targets?.[label];
        const y = r.targets?.yardstick;
        return {
          round: r.round,
          c64Throughput: ratio(a?.c64?.throughput, y?.c64?.throughput),
          c64P99: ratio(a?.c64?.latencyMs?.p99, y?.c64?.latencyMs?.p99),
          c64CpuPerEvent: ratio(a?.c64?.cpuUs?.total, y?.c64?.cpuUs?.total),
          c1P50: ratio(a?.c1?.latencyMs?.p50, y?.c1?.latencyMs?.p50),
        };
      });
      const med = (key) => median(perRound.map((p) => p[key]));
      return [
        label,
        {
          perRound,
          median: {
            c64Throughput: med('c64Throughput'),
            c64P99: med('c64P99'),
            c64CpuPerEvent: med('c64CpuPerEvent'),
            c1P50: med('c1P50'),
          },
        },
      ];
    }),
  );
  return { targets, paired };
};

/** A target's round lost nothing: no error, every answer 200, every counter's count its acknowledged sum. */
const clean = (run) =>
  Boolean(run) &&
  !run.error &&
  Boolean(run.verify?.ok) &&
  ['create', 'warmup', ...PHASES].every(
    (phase) =>
      (phase === 'warmup' && !run.warmup) || (run[phase] && Object.keys(run[phase].statusCounts ?? {}).every((key) => key === '200')),
  );

/** The issue's aims for one arm, from the summary (paired medians) and the rounds: printed, not asserted. */
export const aimsFor = (summary, label, rounds) => {
  const p = summary.paired[label]?.median ?? {};
  const cpu = summary.targets[label]?.c64?.cpuUs?.total ?? null;
  const aims = [
    {
      aim: 'C=64: events/s ≥ 2× the yardstick’s',
      value: p.c64Throughput,
      unit: '×',
      met: p.c64Throughput == null ? null : p.c64Throughput >= 2,
    },
    { aim: 'C=64: p99 ≤ the yardstick’s', value: p.c64P99, unit: '×', met: p.c64P99 == null ? null : p.c64P99 <= 1 },
    { aim: 'nothing lost (every answer 200, every count its acknowledged INCs)', met: rounds.every((r) => clean(r.targets?.[label])) },
    { aim: 'C=1: p50 below the yardstick’s', value: p.c1P50, unit: '×', met: p.c1P50 == null ? null : p.c1P50 < 1 },
    { aim: 'C=64: server CPU per event ≤ 300 µs', value: cpu, unit: 'µs', met: cpu == null ? null : cpu <= 300 },
  ];
  return aims;
};

/** Failed: an error, a target's round with an error, a non-200 answer or a count that is not its acknowledged INCs. Skipped is not failed. */
export const yardstickFailed = (r) => {
  if (r.skipped) return false;
  if (r.error || !r.rounds?.length) return true;
  return r.rounds.some((round) => round.order.some((label) => !clean(round.targets?.[label])));
};

// ---------------------------------------------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Runs one of the yardstick's scripts to its exit; its output goes to a file (start.sh's service keeps its stdout). */
const runScript = async (script, args, env, timeoutMs) => {
  const outPath = join(tmpdir(), `statehold-bench-yardstick-${process.pid}-${Date.now()}.out`);
  const fd = openSync(outPath, 'w');
  const child = spawn('bash', [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const timer = setTimeout(() => {
    for (const pid of family(child.pid).reverse()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
  }, timeoutMs);
  const { code, signal } = await new Promise((done) => child.once('exit', (c, s) => done({ code: c, signal: s })));
  clearTimeout(timer);
  const output = readFileSync(outPath, 'utf8');
  rmSync(outPath, { force: true });
  return { code, signal, output };
};

const commOf = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** start.sh on a free port: the service's pids (its shell and node) and PostgreSQL's postmaster. */
const startYardstick = async ({ dir, stateDir }) => {
  const port = await freePort();
  const t0 = Date.now();
  const started = await runScript(join(dir, 'start.sh'), [], { PORT: String(port), YARDSTICK_DIR: stateDir }, YARDSTICK_START_TIMEOUT_MS);
  if (started.code !== 0)
    throw new Error(`yardstick start.sh exited (code ${started.code}, signal ${started.signal}): ${started.output.slice(-2000)}`);
  const shellPid = Number(started.output.trim().split('\n').pop());
  if (!Number.isInteger(shellPid) || shellPid <= 0) throw new Error(`yardstick start.sh printed no pid: ${started.output.slice(-500)}`);
  // service.pid is the subshell that runs `node server.mjs` as its child: the node is what serves.
  const nodePid = family(shellPid).find((pid) => pid !== shellPid && commOf(pid) === 'node') ?? shellPid;
  const postmasterPid = Number(readFileSync(join(stateDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { port, url: `http://127.0.0.1:${port}`, shellPid, nodePid, postmasterPid, startS: (Date.now() - t0) / 1000 };
};

/** Stops the service: its node by SIGTERM (stop.sh kills only the shell above it), then stop.sh (`all`: PostgreSQL too). */
const stopYardstick = async (service, { dir, stateDir, all }) => {
  const notes = [];
  if (service && alive(service.nodePid)) {
    process.kill(service.nodePid, 'SIGTERM');
    for (let i = 0; i < 50 && alive(service.nodePid); i++) await sleep(100);
    if (alive(service.nodePid)) {
      process.kill(service.nodePid, 'SIGKILL');
      notes.push(`node ${service.nodePid} needed SIGKILL`);
    }
  }
  const stopped = await runScript(join(dir, 'stop.sh'), all ? ['all'] : [], { YARDSTICK_DIR: stateDir }, YARDSTICK_STOP_TIMEOUT_MS);
  if (stopped.code !== 0) notes.push(`stop.sh exited ${stopped.code}: ${stopped.output.slice(-500)}`);
  for (const pid of service ? [service.nodePid, service.shellPid] : []) {
    if (alive(pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
      notes.push(`${pid} still running after stop.sh: SIGKILLed`);
    }
  }
  return notes;
};

/** One forked load process (yardstick-load.mjs); a call that overruns kills it. */
const startLoad = (params, log) => startForked({ script: LOAD_SCRIPT, params, name: 'yardstick load process', log, killOnTimeout: true });

const allOk = (counts) => Object.keys(counts ?? {}).every((key) => key === '200');

/**
 * One target's round: K counters created, a warm-up, the C loop and the C=1 loop, each sampled from
 * /proc (`processes`: name → pid, each with its descendants), then every counter read back.
 */
const measureTarget = async ({ out, target, processes, split, scenario, config, log }) => {
  const { label } = out;
  const capMs = scenario.capS * 1000 + 60_000;
  const load = await startLoad({ target, instances: scenario.instances, connections: scenario.concurrency }, log);
  try {
    out.create = await load.call('create', { concurrency: CREATE_CONCURRENCY }, capMs);
    if (!allOk(out.create.statusCounts)) throw new Error(`${label}: creating counters: ${failureText(out.create.statusCounts)}`);
    if (scenario.warmupEvents > 0) {
      const { overTime, latencyMs, ...warmup } = await load.call(
        'loop',
        { concurrency: scenario.concurrency, events: scenario.warmupEvents, capS: scenario.capS, record: false },
        capMs,
      );
      out.warmup = warmup;
      if (!allOk(warmup.statusCounts)) throw new Error(`${label}: warm-up: ${failureText(warmup.statusCounts)}`);
    }
    for (const [phase, concurrency, events] of [
      ['c64', scenario.concurrency, scenario.events],
      ['c1', 1, scenario.c1Events],
    ]) {
      const samplers = Object.entries({ ...processes, generator: load.pid }).map(([name, pid]) => ({
        name,
        sampler: startSampler(pid, config.sampleMs),
      }));
      const loop = await load.call('loop', { concurrency, events, capS: scenario.capS, record: true }, capMs);
      const sampled = Object.fromEntries(samplers.map(({ name, sampler }) => [name, sampler.stop()]));
      const us = (pct, s) => (pct == null || !loop.acked ? null : Math.round(((pct / 100) * s.wallS * 1e6) / loop.acked));
      const cpuUs = {};
      if (split) {
        const s = sampled[split];
        cpuUs.main = us(s.cpuSplitPct.main, s);
        cpuUs.nodeOther = us(s.cpuSplitPct.nodeOther, s);
        cpuUs.worker = us(s.cpuSplitPct.worker, s);
      }
      for (const name of Object.keys(processes)) if (name !== split) cpuUs[name] = us(sampled[name].cpuPct, sampled[name]);
      cpuUs.total = Object.values(cpuUs).some((v) => v == null) ? null : Object.values(cpuUs).reduce((a, b) => a + b, 0);
      out[phase] = {
        ...loop,
        cpuUs,
        generatorUs: us(sampled.generator.cpuPct, sampled.generator),
        hostBusyCores: sampled.generator.hostBusyCores,
        rssPeakMb: Object.fromEntries(Object.keys(processes).map((name) => [name, sampled[name].rssPeakMb])),
      };
      log(
        `yardstick: ${label}: ${phase}: ${loop.throughput} ev/s, p50 ${loop.latencyMs?.p50} ms, p99 ${loop.latencyMs?.p99} ms, ` +
          `${failureText(loop.statusCounts)} non-200, CPU ${cpuUs.total} µs/event`,
      );
    }
    out.verify = await load.call('verify', { concurrency: CREATE_CONCURRENCY }, capMs);
    log(
      `yardstick: ${label}: verified ${out.verify.counters} counters: ${out.verify.mismatches} mismatches, ${out.verify.answerMismatches} wrong answers`,
    );
  } finally {
    await load.stop();
  }
};

const stateholdRound = async ({ arm, code, scenario, config, deps }) => {
  const { startServer, repoRoot, log } = deps;
  const root = arm.repoRoot ?? repoRoot;
  const out = { label: arm.label, kind: 'statehold' };
  let server;
  try {
    if (!existsSync(join(root, 'dist/bin/statehold.js'))) throw new Error(`${root}/dist/bin/statehold.js is missing (make build there)`);
    server = await startServer({
      repoRoot: root,
      adminKey: config.adminKey,
      label: `yardstick-${arm.label}`,
      args: arm.args,
      profileDir: config.profile ? join(repoRoot, 'bench/results/prof') : undefined,
    });
    log(`yardstick: ${arm.label}: server pid ${server.pid} at ${server.url}${arm.args.length ? ` (${arm.args.join(' ')})` : ''}`);
    const { token } = await setupMachine({
      url: server.url,
      adminKey: config.adminKey,
      machine: MACHINE,
      code,
      clientInfo: `bench yardstick (xstate ${scenario.xstate}, smply bundle)`,
    });
    await measureTarget({
      out,
      target: { kind: 'statehold', url: server.url, token, machine: MACHINE },
      processes: { server: server.pid },
      split: 'server',
      scenario,
      config,
      log,
    });
  } catch (err) {
    out.error = String(err?.stack ?? err);
  } finally {
    if (server) {
      const stopped = await server.stop({ keepData: config.keepData });
      out.serverExit = { code: stopped.code, signal: stopped.signal };
      if (stopped.code !== 0) out.serverStderrTail = stopped.stderrTail;
      if (config.keepData) out.dataDir = server.dataDir;
      if (server.profileFile) out.profileFile = server.profileFile;
    }
  }
  return out;
};

const yardstickRound = async ({ scenario, config, log }) => {
  let service;
  const out = { label: 'yardstick', kind: 'yardstick' };
  try {
    // FRESH (the service's default) truncates its table on start: a restart per round starts it empty.
    service = await startYardstick({ dir: scenario.dir, stateDir: scenario.stateDir });
    log(
      `yardstick: service node pid ${service.nodePid} at ${service.url}, PostgreSQL postmaster ${service.postmasterPid} (start ${service.startS.toFixed(1)} s)`,
    );
    out.startS = service.startS;
    await measureTarget({
      out,
      target: { kind: 'yardstick', url: service.url },
      processes: { node: service.nodePid, postgres: service.postmasterPid },
      scenario,
      config,
      log,
    });
  } catch (err) {
    out.error = String(err?.stack ?? err);
  } finally {
    const notes = await stopYardstick(service, { dir: scenario.dir, stateDir: scenario.stateDir, all: false });
    if (notes.length) out.stopNotes = notes;
  }
  return out;
};

const versionsOf = (scenario) => {
  const read = (path) => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return undefined;
    }
  };
  const pkg = read(join(scenario.dir, 'package.json'));
  return { postgres: read(join(scenario.stateDir, 'pg', 'PG_VERSION')), service: pkg ? JSON.parse(pkg).dependencies : undefined };
};

export const runYardstick = async (scenario, config, deps) => {
  const { repoRoot, log } = deps;
  if (!existsSync(join(scenario.dir, 'start.sh')))
    return { scenario, skipped: `no yardstick at ${scenario.dir} (its start.sh is missing; BENCH_YARDSTICK_DIR names another folder)` };
  const labels = scenario.arms.map((a) => a.label);
  const out = { scenario, rounds: [] };
  try {
    const code = await yardstickCounterCode(scenario.xstate, repoRoot);
    out.codeBytes = code.length;
    for (let round = 1; round <= scenario.rounds; round++) {
      const order = roundOrder(labels, round);
      const r = { round, order, targets: {} };
      out.rounds.push(r);
      for (const label of order) {
        log(`yardstick: round ${round}: ${label}`);
        r.targets[label] =
          label === 'yardstick'
            ? await yardstickRound({ scenario, config, log })
            : await stateholdRound({ arm: scenario.arms.find((a) => a.label === label), code, scenario, config, deps });
      }
    }
  } catch (err) {
    out.error = String(err?.stack ?? err);
  } finally {
    out.versions = versionsOf(scenario);
    if (scenario.stopPostgres) {
      const notes = await stopYardstick(undefined, { dir: scenario.dir, stateDir: scenario.stateDir, all: true });
      if (notes.length) out.stopNotes = notes;
    }
  }
  out.summary = summarizeRounds(out.rounds, labels);
  out.aims = Object.fromEntries(labels.map((label) => [label, aimsFor(out.summary, label, out.rounds)]));
  return out;
};

// ---------------------------------------------------------------------------------------------------

const cpuText = (cpu, fmt) => {
  if (!cpu || cpu.total === undefined) return '–';
  const n = (x) => (x == null ? '–' : fmt(x, 0));
  if ('main' in cpu) return `${n(cpu.total)} (${n(cpu.main)} / ${n(cpu.nodeOther)} / ${n(cpu.worker)})`;
  return `${n(cpu.total)} (node ${n(cpu.node)} + PostgreSQL ${n(cpu.postgres)})`;
};

const mergeCounts = (list) => {
  const all = {};
  for (const counts of list) for (const [key, n] of Object.entries(counts ?? {})) all[key] = (all[key] ?? 0) + n;
  return all;
};

export const yardstickMarkdown = (r, fmt) => {
  const s = r.scenario;
  if (r.skipped) return ['', `### yardstick: skipped — ${r.skipped}`];
  const labels = s.arms.map((a) => a.label);
  const lines = [
    '',
    `### yardstick: Statehold against the yardstick (K=${int(s.instances)}, C=${s.concurrency}: ${int(s.events)} events, C=1: ${int(s.c1Events)}, ${int(s.warmupEvents)} warm-up, ${s.rounds} rounds)`,
    '',
    `The yardstick (\`${s.dir}\`): fastify + xstate 5, an actor per key in memory, each event's snapshot UPSERTed into PostgreSQL ${r.versions?.postgres ?? ''} (autocommit, synchronous_commit on) before its answer; ` +
      `Statehold: the same counter (xstate ${s.xstate}, bundled as smply does), a fresh \`statehold serve\` per round and arm (${s.arms
        .map((a) => `\`${a.label}\`${a.repoRoot ? ` from ${a.repoRoot}` : ''}${a.args.length ? ` with \`${a.args.join(' ')}\`` : ''}`)
        .join(', ')}); ` +
      'both from the same closed-loop code in a forked process, each target fresh per round, the order alternating by round. Medians over rounds. ' +
      'CPU µs per acknowledged event from /proc: Statehold total (main thread / other threads / sandbox workers); the yardstick total (its node process + every PostgreSQL process). ' +
      'Generator: the load process; host busy cores: everything on the host meanwhile.',
    '',
    '| target | load | ev/s | p50 | p90 | p99 | max | non-200 | server CPU µs/ev | generator µs/ev | host busy cores | verified |',
    '|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|',
  ];
  for (const label of ['yardstick', ...labels]) {
    const runs = (r.rounds ?? []).map((round) => round.targets?.[label]).filter(Boolean);
    const verified = runs.every((run) => run.verify)
      ? runs.every((run) => run.verify.ok)
        ? `ok (${int(s.instances)} × ${runs.length})`
        : `**${runs.reduce((n, run) => n + run.verify.mismatches + run.verify.answerMismatches, 0)} mismatches**`
      : '**not verified**';
    for (const phase of PHASES) {
      const m = r.summary?.targets?.[label]?.[phase] ?? {};
      const failed = failureText(mergeCounts(runs.map((run) => run[phase]?.statusCounts)));
      lines.push(
        `| ${label} | C=${phase === 'c64' ? s.concurrency : 1} | ${int(m.perSecond)} | ${fmt(m.p50)} | ${fmt(m.p90)} | ${fmt(m.p99)} | ${fmt(m.max)} | ${failed} | ` +
          `${cpuText(m.cpuUs, fmt)} | ${m.generatorUs == null ? '–' : fmt(m.generatorUs, 0)} | ${fmt(m.hostBusyCores)} | ${verified} |`,
      );
    }
  }
  lines.push(
    '',
    "Each round's own ratios, Statehold ÷ yardstick (C=64 events/s: above 1 is faster; p99, p50 and CPU: below 1 is better):",
    '',
    '| round | order | arm | C=64 ev/s | C=64 p99 | C=64 CPU/ev | C=1 p50 |',
    '|---:|---|---|---:|---:|---:|---:|',
  );
  for (const round of r.rounds ?? []) {
    for (const label of labels) {
      const p = r.summary?.paired?.[label]?.perRound?.find((x) => x.round === round.round) ?? {};
      lines.push(
        `| ${round.round} | ${round.order.join(', ')} | ${label} | ${fmt(p.c64Throughput)} | ${fmt(p.c64P99)} | ${fmt(p.c64CpuPerEvent)} | ${fmt(p.c1P50)} |`,
      );
    }
  }
  for (const label of labels) {
    const p = r.summary?.paired?.[label]?.median ?? {};
    lines.push(`| median | | ${label} | ${fmt(p.c64Throughput)} | ${fmt(p.c64P99)} | ${fmt(p.c64CpuPerEvent)} | ${fmt(p.c1P50)} |`);
  }
  lines.push('', "The issue's aims (printed, not asserted; ratios are the median of each round's own):", '');
  for (const label of labels) {
    const aims = (r.aims?.[label] ?? [])
      .map(
        (a) =>
          `${a.aim}${a.value == null ? '' : `: ${a.unit === 'µs' ? fmt(a.value, 0) : fmt(a.value)} ${a.unit}`} — ${a.met == null ? 'no figure' : a.met ? 'met' : '**not met**'}`,
      )
      .join('; ');
    lines.push(`- \`${label}\`: ${aims}.`);
  }
  for (const round of r.rounds ?? []) {
    for (const label of round.order) {
      const run = round.targets?.[label];
      if (run?.error) lines.push('', `**yardstick: round ${round.round}, ${label} failed:** ${run.error}`);
      if (run?.verify && !run.verify.ok)
        lines.push(
          '',
          `**yardstick: round ${round.round}, ${label}:** ${run.verify.mismatches} counters wrong (${run.verify.lost} short), ${run.verify.answerMismatches} answers with a wrong count: ${JSON.stringify([...run.verify.examples, ...run.verify.answerMismatchExamples].slice(0, 3))}`,
        );
      for (const phase of PHASES)
        if (run?.[phase]?.cappedByTime)
          lines.push('', `**yardstick: round ${round.round}, ${label}, ${phase} stopped by the ${s.capS} s time cap.**`);
      if (run?.stopNotes) lines.push('', `yardstick: round ${round.round}, ${label}: ${run.stopNotes.join('; ')}`);
    }
  }
  return lines;
};
