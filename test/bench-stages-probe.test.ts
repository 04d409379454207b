import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { removeDir, startNode, tempDataDir } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { repoRoot } from './helpers/paths.js';

const probe = join(repoRoot, 'bench', 'probes', 'stages.mjs');

const TOGGLE = `import { createMachine, assign } from "xstate";
export default createMachine({
  predictableActionArguments: true,
  initial: "off",
  context: { n: 0 },
  states: {
    off: { on: { FLIP: { target: "on", actions: assign({ n: (c) => c.n + 1 }) } } },
    on: { on: { FLIP: { target: "off", actions: assign({ n: (c) => c.n + 1 }) } } },
  },
});
export const allowRead = () => true;
export const allowWrite = () => true;
`;

// The probe wraps methods of the built server by name: this fails when one of them is renamed or the
// event path stops passing through them, instead of the probe silently measuring nothing.
t.test('bench/probes/stages.mjs times the stages of events sent to a real node', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const out = join(dataDir, 'stages.json');
  const node = await startNode({ dataDir, nodeArgs: ['--import', probe], env: { STAGES_OUT: out, STAGES_SKIP: '2' } });
  t.teardown(() => node.stop());
  const { operator } = await machineWithVersion(node, 'toggle', TOGGLE);
  await operator.machineInstances.create('toggle', { slug: 'a' });
  await operator.machineInstances.create('toggle', { slug: 'b' });
  for (let i = 0; i < 6; i++)
    await Promise.all([
      operator.machineInstances.sendEvent('toggle', 'a', { event: 'FLIP' }),
      operator.machineInstances.sendEvent('toggle', 'b', { event: 'FLIP' }),
    ]);
  t.equal((await operator.machineInstances.get('toggle', 'a')).state, 'off', 'the node answers as usual with the probe loaded (six flips)');
  t.equal(await node.stop('SIGTERM'), 0, 'and stops cleanly');
  t.ok(existsSync(out), 'the probe wrote its figures at SIGTERM');
  const summary = JSON.parse(readFileSync(out, 'utf8'));
  t.equal(summary.events, 10, '12 events, less the 2 skipped');
  for (const stage of [
    'before the sandbox',
    'worker round trip',
    'step result parsed',
    'head and records built',
    'commit',
    '  of it the log frame',
    'answered',
    'total',
  ]) {
    t.ok(summary.stages[stage], `${stage.trim()} is timed`);
    t.ok(summary.stages[stage].p50 >= 0 && summary.stages[stage].p99 >= summary.stages[stage].p50, `${stage.trim()}: p99 >= p50 >= 0`);
  }
  t.ok(
    summary.stages.total.mean >= summary.stages['worker round trip'].mean + summary.stages.commit.mean,
    'the total holds the round trip and the commit',
  );
  t.match(node.output(), /stages probe: 10 events/, 'and printed a summary');
});
