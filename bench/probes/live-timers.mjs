/**
 * What a step costs the sandbox when the version's isolate holds N live actors that each have a
 * pending delayed event (a session that expires after an hour: the usual `after`), for several N: the
 * step on a live actor, and the step that first restores an evicted one (stopping another, as the
 * runtime's eviction does). Before 2026-11-26 an actor's timers were found by walking every timer of
 * the isolate, so each step cost grew with N. One process, no IPC, no HTTP; medians of alternating rounds.
 *   node --no-node-snapshot bench/probes/live-timers.mjs [N,N,...] [ROUNDS] [DIST]
 */
import { writeProbeReport } from '../lib/probe-report.mjs';
import { SESSION_MACHINE } from '../lib/session-machine.mjs';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dist = resolve(repoRoot, process.argv[4] ?? 'dist');
const { VersionIsolate } = await import(join(dist, 'sandbox/version-isolate.js'));

const code = SESSION_MACHINE;

const NS = (process.argv[2] ?? '1000,20000').split(',').map(Number);
const ROUNDS = Number(process.argv[3] ?? 3);
const STEPS = 3_000;
const caller = { machineInstanceName: 'x', authContext: {} };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const usPer = (count, step) => {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < count; i++) step(i);
  return Number(process.hrtime.bigint() - t0) / 1e3 / count;
};

const runs = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const n of NS) {
    const vi = await VersionIsolate.load({ versionId: `v${n}`, code, liveActorMemoryMb: 512, cpuLimitMs: 10_000 });
    const now = Date.now();
    const heads = [];
    for (let i = 0; i < n; i++) heads[i] = vi.start(`k${i}`, { context: {} }, { nowMs: now });
    for (let i = 0; i < 200; i++) heads[i] = vi.sendAuthorized(`k${i}`, caller, { type: 'INC' }, now); // warm-up
    const live = usPer(STEPS, (i) => {
      const k = i % n;
      heads[k] = vi.sendAuthorized(`k${k}`, caller, { type: 'INC' }, now);
    });
    // an evicted actor: one actor stopped, another restored from its head in the step's call
    const restored = usPer(STEPS, (i) => {
      const k = i % n;
      vi.stop(`k${k}`);
      const h = heads[k];
      heads[k] = vi.sendAuthorized(`k${k}`, caller, { type: 'INC' }, now, {
        name: `k${k}`,
        snapshot: h.snapshot,
        value: h.state,
        context: h.context,
        pendingTimers: h.pendingTimers,
      });
    });
    (runs[n] ??= []).push({ live, restored });
    vi.dispose();
  }
}
const rows = NS.map((n) => ({
  liveActors: n,
  liveStepUs: Number(median(runs[n].map((r) => r.live)).toFixed(1)),
  restoreStepUs: Number(median(runs[n].map((r) => r.restored)).toFixed(1)),
}));
console.log(`live actors with a pending delayed event each; µs per step (whole call), medians of ${ROUNDS} rounds (${dist})`);
for (const r of rows) console.log(`  ${String(r.liveActors).padStart(7)}: live ${r.liveStepUs}, restored ${r.restoreStepUs}`);
const out = writeProbeReport('live-timers', { dist, rounds: ROUNDS, steps: STEPS, rows, runs });
console.log(`wrote ${out}`);
