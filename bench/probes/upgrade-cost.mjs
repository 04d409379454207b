// What an upgrade costs (issue 18): the first event after an instance's desired version changed runs
// the migration chain, restarts the instance on the new version and commits the upgrade record
// before the event itself; compared with an ordinary event on the same instances, in the same run.
//
//   node --no-node-snapshot bench/probes/upgrade-cost.mjs        (after `make build`)
//
// N instances (UPGRADE_N, default 200) of a machine with a nested state and a history state, one event
// at a time (C=1, so each latency is the request's own): an ordinary event on v1, then the desired
// version set to v2 (one migration) and the next event (the upgrade), then one more (ordinary, on
// v2); then the same from v2 to v3. Prints medians, p90 and the ratios, and writes them to
// bench/results/upgrade-cost-<time>.json.
import { StateBackedClient } from '@statebacked/client';
import { fileURLToPath } from 'node:url';
import { startServer } from '../lib/server-process.mjs';
import { writeProbeReport } from '../lib/probe-report.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const N = Number(process.env.UPGRADE_N ?? 200);
const adminKey = `bench-upgrade-${Date.now()}`;

const machineCode = (names, extra = '') => `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'player', predictableActionArguments: true, initial: '${names.on}', context: { n: 0 },
  states: {
    ${names.on}: { initial: '${names.playing}', on: { OFF: '${names.off}', TICK: { actions: assign({ n: (c) => c.n + 1 }) } },
      states: { ${names.playing}: { on: { PAUSE: '${names.paused}' } }, ${names.paused}: { on: { PLAY: '${names.playing}' } }, hist: { type: 'history' } } },
    ${names.off}: { on: { ON: '${names.on}.hist', TICK: { actions: assign({ n: (c) => c.n + 1 }) } } },
  } });
export const allowRead = () => true;
export const allowWrite = () => true;
${extra}`;
const v1Names = { on: 'on', playing: 'playing', paused: 'paused', off: 'off' };
const v2Names = { on: 'powered', playing: 'running', paused: 'held', off: 'standby' };
const rename = (from, to) => `const names = ${JSON.stringify(Object.fromEntries(Object.keys(from).map((k) => [from[k], to[k]])))};
export const upgradeState = (path) => path.map((name) => names[name] ?? name);
export const upgradeContext = (oldPaths, newPaths, context) => ({ ...context, upgraded: (context.upgraded ?? 0) + 1 });`;

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const summary = (values) => ({
  p50: +quantile(values, 0.5).toFixed(2),
  p90: +quantile(values, 0.9).toFixed(2),
  max: +Math.max(...values).toFixed(2),
});

const server = await startServer({ repoRoot, adminKey, label: 'upgrade-cost' });
try {
  const client = new StateBackedClient(adminKey, { apiHost: server.url });
  await client.machines.create('player');
  const version = async (code, makeCurrent = false) =>
    (await client.machineVersions.create('player', { clientInfo: 'bench', makeCurrent, code })).machineVersionId;
  const v1 = await version(machineCode(v1Names), true);
  const v2 = await version(machineCode(v2Names));
  const v3 = await version(machineCode(v2Names, 'export const third = true;'));
  await client.machineVersionMigrations.create('player', {
    fromMachineVersionId: v1,
    toMachineVersionId: v2,
    code: rename(v1Names, v2Names),
  });
  await client.machineVersionMigrations.create('player', {
    fromMachineVersionId: v2,
    toMachineVersionId: v3,
    code: rename(v2Names, v2Names),
  });
  const names = Array.from({ length: N }, (_, i) => `p${i}`);
  for (const name of names) await client.machineInstances.create('player', { slug: name });
  const timed = async (name) => {
    const started = performance.now();
    await client.machineInstances.sendEvent('player', name, { event: 'TICK' });
    return performance.now() - started;
  };
  // Warm: every instance has run an event, the versions' isolates are loaded.
  for (const name of names) await timed(name);

  const rounds = {};
  const round = async (label, target) => {
    const ordinary = [];
    for (const name of names) ordinary.push(await timed(name));
    for (const name of names) await client.machineInstances.admin.updateDesiredVersion('player', name, { targetMachineVersionId: target });
    const upgrade = [];
    for (const name of names) upgrade.push(await timed(name));
    const after = [];
    for (const name of names) after.push(await timed(name));
    rounds[label] = {
      ordinary: summary(ordinary),
      upgrade: summary(upgrade),
      afterUpgrade: summary(after),
      ratioP50: +(quantile(upgrade, 0.5) / quantile(ordinary, 0.5)).toFixed(1),
    };
  };
  await round('one migration (v1 → v2)', v2);
  // (back on v1 is not possible without a migration v2 → v1: the second round goes on from v2 to v3)
  await round('v2 → v3', v3);
  const check = await client.machineInstances.admin.get('player', names[0]);
  if (check.machineVersion.id !== v3) throw new Error(`the instances did not reach v3: ${JSON.stringify(check.machineVersion)}`);
  const report = { at: new Date().toISOString(), instances: N, concurrency: 1, unit: 'ms per request (client side)', rounds };
  console.log(JSON.stringify(report, null, 2));
  writeProbeReport('upgrade-cost', report);
} finally {
  await server.stop();
}
