// Writes bench/results/<timestamp>.json and bench/results/latest.md, and renders the markdown summary.
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { profileMarkdown } from '../profile-summary.mjs';
import { neighboursMarkdown } from './neighbours.mjs';
import { instancesMarkdown } from './instances.mjs';
import { realtimeMarkdown } from './realtime.mjs';
import { clusterMarkdown } from './cluster-figures.mjs';
import { indexesMarkdown } from './indexes.mjs';
import { yardstickMarkdown } from './yardstick.mjs';
import { failureText, int } from './markdown-format.mjs';

const fmt = (x, digits = 2) => (x === null || x === undefined ? '–' : typeof x === 'number' ? x.toFixed(digits) : String(x));

const describeLoad = (s) =>
  s.kind === 'closed'
    ? `closed, C=${s.concurrency}, E=${s.events}, K=${s.instances}`
    : `open, ${s.rate}/s × ${s.durationS} s, K=${s.instances}`;

const errorText = failureText;

/** Host busy cores, and in brackets what neither the server nor the generator used (noise from elsewhere). */
const hostText = (server, measure) => {
  if (server.hostBusyCores === null || server.hostBusyCores === undefined) return '–';
  const others = server.hostBusyCores - (server.cpuPct ?? 0) / 100 - (measure.generatorCpuPct ?? 0) / 100;
  return `${fmt(server.hostBusyCores)} (${fmt(Math.max(0, others))})`;
};

export const renderMarkdown = (report) => {
  const { env, scenarios } = report;
  const lines = [
    `# Statehold benchmark — ${report.startedAt}`,
    '',
    `commit \`${env.commit}\`${env.dirty ? ' (uncommitted changes)' : ''}, \`--commit-log ${env.commitLog ?? 'lmdb'}\`, node ${env.node}${env.serverNodeArgs ? ` (server: \`${env.serverNodeArgs}\`)` : ''}, ${env.nproc} cores (${env.cpuModel}), ` +
      `load average at start ${env.loadAverageAtStart.join(' / ')}; server and load generator on the same host, separate processes. ` +
      `Latencies in ms; CPU % is of one core; server CPU and RSS include its sandbox worker processes (the main one and, once an upload started it, the quarantine worker); "host busy cores" counts every process on the host during the measured phase, and "(others)" what the server and the generator did not use: above ≈ 0.1 the figures are disturbed by other work.`,
    '',
    '| scenario | load | acked ev/s | p50 | p90 | p99 | max | non-200 | server CPU % | server RSS peak / end MB | generator CPU % | host busy cores (others) | verified |',
    '|---|---|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---|',
  ];
  for (const r of scenarios) {
    if (['neighbours', 'instances', 'realtime', 'cluster', 'indexes', 'yardstick'].includes(r.scenario.kind)) continue;
    const m = r.measure ?? {};
    const l = m.latencyMs ?? {};
    const s = r.server ?? {};
    const v = r.verify;
    const verified = r.error ? `**error**` : v ? (v.ok ? `ok (${int(v.historyEvents)} ev)` : `**${v.mismatches} mismatches**`) : '–';
    lines.push(
      `| ${r.scenario.id} | ${describeLoad(r.scenario)} | ${int(m.throughput)} | ${fmt(l.p50)} | ${fmt(l.p90)} | ${fmt(l.p99)} | ${fmt(l.max)} | ${errorText(m.statusCounts)} | ` +
        `${fmt(s.cpuPct, 0)} | ${fmt(s.rssPeakMb, 0)} / ${fmt(s.rssEndMb, 0)} | ${fmt(m.generatorCpuPct, 0)} | ${hostText(s, m)} | ${verified} |`,
    );
  }
  const split = scenarios.filter((r) => r.server?.cpuSplitPct?.main != null && r.measure?.throughput);
  if (split.length) {
    lines.push(
      '',
      "Server CPU per acknowledged event (µs; CPU time over the measured phase ÷ events), by where it ran: the node's main thread, its other threads (LMDB writer, libuv, GC helpers), the sandbox workers. \"Waiting for a CPU\": the share of the measured phase the node's and the workers' JavaScript threads were ready to run but had no core (from schedstat).",
      '',
      '| scenario | main thread | node, other threads | sandbox worker | total | waiting for a CPU: node / worker |',
      '|---|---:|---:|---:|---:|---:|',
    );
    for (const r of split) {
      const perEvent = (pct) => (pct === null ? null : (pct / 100 / r.measure.throughput) * 1e6);
      const c = r.server.cpuSplitPct;
      const parts = [perEvent(c.main), perEvent(c.nodeOther), perEvent(c.worker)];
      const w = r.server.waitingForCpuPct ?? {};
      const waiting = w.main == null ? '–' : `${fmt(w.main, 0)} % / ${fmt(w.worker, 0)} %`;
      lines.push(
        `| ${r.scenario.id} | ${parts.map((x) => fmt(x, 0)).join(' | ')} | ${fmt(
          parts.reduce((a, b) => a + (b ?? 0), 0),
          0,
        )} | ${waiting} |`,
      );
    }
  }
  const timed = scenarios.filter((r) => r.measure?.overTime?.windows?.length);
  if (timed.length) {
    lines.push(
      '',
      'Over time: answers grouped by when they arrived, in windows of the measured phase; each window gives events/s and p99 (ms). The first second shows what is still warming up (JIT, caches, heap sizing) after the warm-up events; "after 1 s" is the rest of the phase.',
      '',
    );
    for (const r of timed) {
      const t = r.measure.overTime;
      const windows = t.windows.map((w) => `${int(w.perSecond)} / ${fmt(w.p99, 1)}`).join(' · ');
      const rest =
        t.afterFirstSecond.count > 0 ? `; after 1 s: p50 ${fmt(t.afterFirstSecond.p50)}, p99 ${fmt(t.afterFirstSecond.p99)}` : '';
      lines.push(`- \`${r.scenario.id}\`, ${t.windowMs} ms windows: ${windows}${rest}.`);
    }
  }
  const open = scenarios.filter((r) => r.measure?.kind === 'open');
  for (const r of open) {
    const m = r.measure;
    lines.push(
      '',
      `Open loop \`${r.scenario.id}\`: ${int(m.scheduled)} events scheduled at ${m.targetRate}/s; latency above counts from the scheduled send time. ` +
        `Service time (send → answer) p50 ${fmt(m.serviceLatencyMs.p50)}, p99 ${fmt(m.serviceLatencyMs.p99)}, max ${fmt(m.serviceLatencyMs.max)}; ` +
        `send lag behind schedule p99 ${fmt(m.sendLagMs.p99)}, max ${fmt(m.sendLagMs.max)}; at most ${m.maxInFlight} in flight, backlog peak ${m.maxBacklog}.` +
        (m.cappedByTime ? ' **Stopped by the time cap.**' : ''),
    );
  }
  for (const r of scenarios) if (r.neighbours) lines.push(...neighboursMarkdown(r, fmt));
  for (const r of scenarios) if (r.scenario.kind === 'instances') lines.push(...instancesMarkdown(r, fmt));
  for (const r of scenarios) if (r.scenario.kind === 'realtime') lines.push(...realtimeMarkdown(r, fmt));
  for (const r of scenarios) if (r.scenario.kind === 'cluster') lines.push(...clusterMarkdown(r, fmt));
  for (const r of scenarios) if (r.scenario.kind === 'indexes') lines.push(...indexesMarkdown(r, fmt));
  for (const r of scenarios) if (r.scenario.kind === 'yardstick') lines.push(...yardstickMarkdown(r, fmt));
  const creates = scenarios.filter((r) => r.create);
  if (creates.length) {
    lines.push(
      '',
      'Instance creation (16 at a time, before each scenario): ' +
        creates
          .map(
            (r) => `${r.scenario.id} ${int(r.create.perSecond)}/s, p50 ${fmt(r.create.latencyMs.p50)}, p99 ${fmt(r.create.latencyMs.p99)}`,
          )
          .join('; ') +
        '.',
    );
  }
  for (const r of scenarios) {
    if (r.measure?.cappedByTime && r.measure.kind === 'closed')
      lines.push('', `**${r.scenario.id} stopped by the ${r.scenario.capS} s time cap** after ${r.measure.issued} events.`);
    if (r.error) lines.push('', `**${r.scenario.id} failed:** ${r.error}`);
    if (r.verify && !r.verify.ok) lines.push('', `**${r.scenario.id} verification:** ${JSON.stringify(r.verify.examples.slice(0, 3))}`);
    if (r.stateMismatches)
      lines.push(
        '',
        `**${r.scenario.id}: ${r.stateMismatches} responses had an unexpected state**: ${JSON.stringify(r.stateMismatchExamples)}`,
      );
  }
  for (const r of scenarios) if (r.profile) lines.push('', `### Server profile during ${r.scenario.id}`, '', profileMarkdown(r.profile));
  return lines.join('\n') + '\n';
};

export const writeReport = (resultsDir, report) => {
  mkdirSync(resultsDir, { recursive: true });
  const stamp = report.startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const jsonPath = join(resultsDir, `${stamp}.json`);
  writeFileSync(jsonPath, JSON.stringify(report, null, 2) + '\n');
  const markdown = renderMarkdown(report);
  writeFileSync(join(resultsDir, 'latest.md'), markdown);
  return { jsonPath, markdown };
};
