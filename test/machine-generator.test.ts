/**
 * The differential test's generator checked against xstate alone: a machine it builds (v4 and v5) must
 * answer each event alike whether its actor stayed live or was restored from the state persisted after
 * the step before (as a node that evicts its actors restores it). Where xstate 5 itself answers otherwise,
 * a failure of the differential test says nothing about Statehold; such corners are kept out by
 * `buildSpec` (seed 616 case 44 was one, before its rule on history targets). The reference settles
 * each step on its simulated clock (every delayed event fired), so a persisted snapshot, which holds
 * no pending delayed events, is all a restore needs.
 *
 * STATEHOLD_GEN_SEEDS (comma-separated, default below) and STATEHOLD_GEN_RUNS (machines per seed).
 */
import fc from 'fast-check';
import t from 'tap';
import * as xstate4 from 'xstate';
import { SimulatedClock as SimulatedClock4 } from 'xstate/lib/SimulatedClock.js';
import * as xstate5 from 'xstate5';
import { buildSpec, caseArbitrary, referenceRun, restoredRun, type XstateModules } from './helpers/machine-generator.js';

const xs: XstateModules = {
  v4: { ...(xstate4 as any), SimulatedClock: SimulatedClock4 },
  v5: xstate5 as any,
};
const SEEDS = (process.env.STATEHOLD_GEN_SEEDS ?? '69,616').split(',').map(Number);
const RUNS = Number(process.env.STATEHOLD_GEN_RUNS ?? 60);

for (const seed of SEEDS) {
  t.test(`seed ${seed}: generated machines answer alike live and restored`, async (t) => {
    const raws = fc.sample(caseArbitrary({ minEvents: 10, maxEvents: 14, instances: 2 }), { seed, numRuns: RUNS });
    let compared = 0;
    for (const [index, raw] of raws.entries()) {
      for (const major of [4, 5] as const) {
        const spec = buildSpec(raw, { regionConflicts: major === 5 || 'targetless' });
        for (const [instance, events] of spec.instances.entries()) {
          const live = (await referenceRun(spec, major, events, xs)).steps.map((step) => ({
            answer: step.kind === 'refused' ? 'refused' : step.state,
            logs: step.logs,
          }));
          const restored = await restoredRun(spec, major, events, xs);
          t.same(restored, live, `case ${index} v${major}, instance ${instance}`);
          compared++;
        }
      }
    }
    t.ok(compared >= 2 * RUNS, `${compared} instances compared`);
  });
}
