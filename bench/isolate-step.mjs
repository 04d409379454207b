// What one event costs inside the sandbox, without HTTP, IPC or storage: the cart machine of the load
// tests in one isolate, K live actors, events round-robin over them through the same call the sandbox
// worker makes (allowWrite and the event in one crossing, then the result read back).
// Run after `make build`: node --no-node-snapshot bench/isolate-step.mjs [ROUNDS=5] [EVENTS=20000] [K=1000]
import { performance } from 'node:perf_hooks';
import { VersionIsolate } from '../dist/sandbox/index.js';
import { MACHINE_CODE, eventFor } from './lib/cart-machine.mjs';

const rounds = Number(process.argv[2] ?? 5);
const events = Number(process.argv[3] ?? 20000);
const actors = Number(process.argv[4] ?? 1000);

const isolate = await VersionIsolate.load({ versionId: 'ver_bench', code: MACHINE_CODE });
const caller = { machineInstanceName: '', authContext: { sub: 'bench' } };
for (let k = 0; k < actors; k++) isolate.startRaw(`a${k}`, { context: {} }, { machineInstanceName: `a${k}` });
const steps = new Array(actors).fill(0);
let n = 0;
const send = () => {
  const k = n % actors;
  const result = isolate.sendAuthorizedRaw(`a${k}`, { ...caller, machineInstanceName: `a${k}` }, eventFor(steps[k]++, n++), Date.now());
  if (result === 'rejected') throw new Error('rejected');
};
for (let i = 0; i < events; i++) send(); // warm-up
const perEventUs = [];
for (let r = 0; r < rounds; r++) {
  const started = performance.now();
  for (let i = 0; i < events; i++) send();
  perEventUs.push(((performance.now() - started) * 1000) / events);
}
perEventUs.sort((a, b) => a - b);
console.log(
  `isolate step (allowWrite + event + result), ${actors} live actors: median ${perEventUs[Math.floor(rounds / 2)].toFixed(1)} µs per event (rounds: ${perEventUs.map((x) => x.toFixed(1)).join(', ')})`,
);
isolate.dispose();
