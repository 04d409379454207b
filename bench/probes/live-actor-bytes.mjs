/**
 * Bytes a live instance holds in its version's isolate, resting (pure steps) or with an interpreter,
 * measured after a full GC of the isolate (run with --expose-gc, which isolates inherit).
 *   node --no-node-snapshot --expose-gc bench/probes/live-actor-bytes.mjs [N]
 */
import { VersionIsolate } from '../../dist/sandbox/version-isolate.js';

const code = `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'counter', predictableActionArguments: true, initial: 'idle', context: { n: 0 },
  states: {
    idle: { on: { INC: { target: 'busy', actions: assign({ n: (c) => c.n + 1 }) } } },
    busy: { on: { INC: { target: 'idle', actions: assign({ n: (c) => c.n + 1 }) }, RESET: 'idle' } },
  } });
export const allowRead = () => true; export const allowWrite = () => true;`;

const N = Number(process.argv[2] ?? 10_000);
if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc');
const usedAfterGc = (vi) => {
  const { isolate, context } = vi;
  for (let i = 0; i < 2; i++) isolate.compileScriptSync('gc()').runSync(context);
  return isolate.getHeapStatisticsSync().used_heap_size;
};
for (const pureSteps of [true, false]) {
  const vi = await VersionIsolate.load({ versionId: 'v', code, pureSteps, liveActorMemoryMb: 512 });
  const base = usedAfterGc(vi);
  for (let i = 0; i < N; i++) vi.start(`k${i}`, { context: {} });
  for (let i = 0; i < N; i++) vi.send(`k${i}`, { type: 'INC' });
  const bytes = Math.round((usedAfterGc(vi) - base) / N);
  console.log(JSON.stringify({ pureSteps, instances: N, bytesPerLiveInstance: bytes }));
  vi.dispose();
}
