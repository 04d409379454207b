/**
 * What a live instance costs its version's isolate, resting (pure steps) or with an interpreter: bytes
 * held (after a full GC of the isolate: run with --expose-gc, which isolates inherit), and the time of
 * a step on a live instance against a step that first restores the instance from its snapshot (what an
 * event for an evicted instance costs the sandbox worker). One process, no IPC, no HTTP.
 *   node --no-node-snapshot --expose-gc bench/probes/live-actors.mjs [N] [ROUNDS] [counter|session]
 * `session`: a machine whose instances each hold a delayed event (an hour's inactivity timeout, reset by
 * every event): since 2026-11-26 those rest too, their timers pending.
 */
import { VersionIsolate } from '../../dist/sandbox/version-isolate.js';
import { SESSION_MACHINE } from '../lib/session-machine.mjs';

const counter = `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'counter', predictableActionArguments: true, initial: 'even', context: { n: 0 },
  states: {
    even: { on: { INC: { target: 'odd', actions: assign({ n: (c) => c.n + 1 }) } } },
    odd: { on: { INC: { target: 'even', actions: assign({ n: (c) => c.n + 1 }) }, STOP: 'stopped' } },
    stopped: { type: 'final' },
  } });
export const allowRead = () => true; export const allowWrite = () => true;`;

const MACHINE = process.argv[4] ?? 'counter';
const code = { counter, session: SESSION_MACHINE }[MACHINE];
if (!code) throw new Error(`unknown machine ${MACHINE}: counter or session`);

const N = Number(process.argv[2] ?? 10_000);
const ROUNDS = Number(process.argv[3] ?? 5);
if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc');
const usedAfterGc = (vi) => {
  const { isolate, context } = vi;
  for (let i = 0; i < 2; i++) isolate.compileScriptSync('gc()').runSync(context);
  return isolate.getHeapStatisticsSync().used_heap_size;
};
const usPerStep = (count, step) => {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < count; i++) step(i);
  return Number((Number(process.hrtime.bigint() - t0) / 1e3 / count).toFixed(1));
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const runs = { true: [], false: [] };
// Alternating rounds, medians: this host is shared and noisy.
for (let round = 0; round < ROUNDS; round++) {
  for (const pureSteps of [true, false]) {
    const vi = await VersionIsolate.load({ versionId: 'v', code, pureSteps, liveActorMemoryMb: 512 });
    const base = usedAfterGc(vi);
    const start = usPerStep(N, (i) => vi.start(`k${i}`, { context: {} }));
    const heads = [];
    const live = usPerStep(N, (i) => {
      heads[i] = vi.send(`k${i}`, { type: 'INC' });
    });
    const bytes = Math.round((usedAfterGc(vi) - base) / N);
    for (let i = 0; i < N; i++) vi.stop(`k${i}`);
    const restored = usPerStep(N, (i) => {
      const h = heads[i];
      vi.send(`k${i}`, { type: 'INC' }, Date.now(), {
        name: `k${i}`,
        snapshot: h.snapshot,
        value: h.state,
        context: h.context,
        pendingTimers: h.pendingTimers,
      });
    });
    runs[pureSteps].push({ bytes, start, live, restored });
    vi.dispose();
  }
}
for (const pureSteps of [true, false]) {
  const r = runs[pureSteps];
  const m = (key) => median(r.map((x) => x[key]));
  console.log(
    JSON.stringify({
      machine: MACHINE,
      pureSteps,
      instances: N,
      rounds: ROUNDS,
      bytesPerLiveInstance: m('bytes'),
      startUs: m('start'),
      liveStepUs: m('live'),
      restoreAndStepUs: m('restored'),
    }),
  );
}
