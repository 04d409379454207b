import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { importing5 } from './fixtures/xstate-v5/machines.js';

/**
 * Instance upgrades of XState v5 machines with the real client (wire-protocol §8.5,
 * docs/migrations.md): the v5 form of upgrades.test.ts's player, a chain of two migrations, a
 * nested state with a history state; and an instance of a v4 version upgraded to a v5 one. On
 * whichever deployment the tests run against.
 */
const node = await startNode();
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const client = new StateBackedClient(admin, { apiHost: node.url });

// v1: a player that is on (playing or paused, remembered by a history state) or off.
const PLAYER_V1 = `{ id: 'player', initial: 'on', context: { volume: 3 },
  states: {
    on: { initial: 'playing', states: { playing: { on: { PAUSE: 'paused' } }, paused: { on: { PLAY: 'playing' } }, hist: { type: 'history' } }, on: { OFF: 'off' } },
    off: { on: { ON: 'on.hist' } },
  } }`;
const V1 = importing5(`export default createMachine(${PLAYER_V1});`);
const V1_4 = `import { createMachine } from 'xstate';
export default createMachine({ predictableActionArguments: true, ...${PLAYER_V1} });
export const allowRead = () => true;
export const allowWrite = () => true;`;
// v2 and v3: the same player renamed (powered.{running,held}, standby), with a volume level, and WAKE, which v1 lacks.
const renamed = (extra: string) => importing5(`export default createMachine({ id: 'player', initial: 'powered', context: { level: 0 },
  states: {
    powered: { initial: 'running', states: { running: { on: { PAUSE: 'held' } }, held: { on: { PLAY: 'running' } }, hist: { type: 'history' } }, on: { OFF: 'standby' } },
    standby: { on: { ON: 'powered.hist', WAKE: { target: 'powered.running', actions: assign({ woken: true }) } } },
  } });
${extra}`);
const V2 = renamed('');
const V3 = renamed('export const edition = 3;');
const M12 = `const names = { on: 'powered', playing: 'running', paused: 'held', off: 'standby' };
export const upgradeState = (path) => path.map((name) => names[name] ?? name);
export const upgradeContext = (oldPaths, newPaths, context) => ({ level: context.volume * 10 });`;
const M23 = `export const upgradeState = (path) => path;
export const upgradeContext = (oldPaths, newPaths, context) => ({ ...context, edition: 3 });`;

const versionOf = async (machine: string, code: string, makeCurrent = false) => (await client.machineVersions.create(machine, { clientInfo: 'v', makeCurrent, code })).machineVersionId;
const migrationOf = async (machine: string, from: string, to: string, code: string) =>
  ((await client.machineVersionMigrations.create(machine, { fromMachineVersionId: from, toMachineVersionId: to, code })) as { machineVersionMigrationId: string }).machineVersionMigrationId;

/** An instance of `machine` on v1, paused then switched off: its history state remembers "paused". */
const pausedAndOff = async (t: Tap.Test, machine: string, name: string) => {
  await client.machineInstances.create(machine, { slug: name });
  await client.machineInstances.sendEvent(machine, name, { event: 'PAUSE' });
  t.equal((await client.machineInstances.sendEvent(machine, name, { event: 'OFF' })).state, 'off', 'off, with "paused" remembered');
};

t.test('v5 v1 → v2 → v3: the next event upgrades, history state and all, then runs on v3', async (t) => {
  await client.machines.create('player5');
  const v1 = await versionOf('player5', V1, true);
  await pausedAndOff(t, 'player5', 'p');

  const v2 = await versionOf('player5', V2);
  const v3 = await versionOf('player5', V3);
  const m12 = await migrationOf('player5', v1, v2, M12);
  const m23 = await migrationOf('player5', v2, v3, M23);
  await client.machineInstances.admin.updateDesiredVersion('player5', 'p', { targetMachineVersionId: v3 });
  t.match(await client.machineInstances.admin.get('player5', 'p'), { machineVersion: { id: v1 }, desiredMachineVersion: { id: v3 } }, 'pending until an event comes');

  const on = await client.machineInstances.sendEvent('player5', 'p', { event: 'ON' });
  t.same(on.state, { powered: 'held' }, 'the history state went back to what v1 remembered, by its v3 name');
  const adminView = await client.machineInstances.admin.get('player5', 'p');
  t.match(adminView, { machineVersion: { id: v3 }, context: { level: 30, edition: 3 } }, 'on v3, with both migrations\' contexts');
  t.notOk((adminView as { desiredMachineVersion?: unknown }).desiredMachineVersion, 'nothing pending any more');

  const { transitions } = await client.machineInstances.listTransitions('player5', 'p');
  t.same(transitions.map((tr) => tr.event.type), ['xstate.init', 'PAUSE', 'OFF', 'statebacked.upgrade', 'ON']);
  t.same(transitions[3]?.event, { type: 'statebacked.upgrade', migrationPath: [m12, m23], fromMachineVersionId: v1, toMachineVersionId: v3 }, 'the upgrade record names the chain');
  t.equal(transitions[3]?.state, 'standby', 'and the upgraded state, before the event');

  await client.machineInstances.sendEvent('player5', 'p', { event: 'PLAY' });
  t.same((await client.machineInstances.sendEvent('player5', 'p', { event: 'OFF' })).state, 'standby');
  t.same((await client.machineInstances.sendEvent('player5', 'p', { event: 'ON' })).state, { powered: 'running' }, 'the rebuilt history goes on remembering on v3');
  await client.machineInstances.sendEvent('player5', 'p', { event: 'OFF' });
  const woken = await client.machineInstances.sendEvent('player5', 'p', { event: 'WAKE' });
  t.same(woken.state, { powered: 'running' }, 'a transition v1 did not have works');
  t.match((await client.machineInstances.admin.get('player5', 'p')).context, { woken: true, level: 30 });
});

t.test('v4 → v5: an instance of a v4 version moves to a v5 one, keeping what its history state remembers', async (t) => {
  await client.machines.create('player45');
  const v1 = await versionOf('player45', V1_4, true);
  await pausedAndOff(t, 'player45', 'p');
  const v2 = await versionOf('player45', V2);
  const m12 = await migrationOf('player45', v1, v2, M12);
  await client.machineInstances.admin.updateDesiredVersion('player45', 'p', { targetMachineVersionId: v2 });

  t.same((await client.machineInstances.sendEvent('player45', 'p', { event: 'ON' })).state, { powered: 'held' }, 'back where v4 had been, by its v5 name');
  t.match(await client.machineInstances.admin.get('player45', 'p'), { machineVersion: { id: v2 }, context: { level: 30 } });
  const { transitions } = await client.machineInstances.listTransitions('player45', 'p');
  t.same(transitions.map((tr) => tr.event.type), ['xstate.init', 'PAUSE', 'OFF', 'statebacked.upgrade', 'ON']);
  t.same(transitions[3]?.event, { type: 'statebacked.upgrade', migrationPath: [m12], fromMachineVersionId: v1, toMachineVersionId: v2 });
  await client.machineInstances.sendEvent('player45', 'p', { event: 'OFF' });
  t.same((await client.machineInstances.sendEvent('player45', 'p', { event: 'WAKE' })).state, { powered: 'running' }, 'the v5 code runs the next events');
  t.match((await client.machineInstances.admin.get('player45', 'p')).context, { woken: true, level: 30 }, 'with v5\'s assign');
});

t.test('a v5 migration that throws or maps to no state fails the event, leaves the instance on its version, and is logged', async (t) => {
  await client.machines.create('fragile5');
  const v1 = await versionOf('fragile5', V1, true);
  const v2 = await versionOf('fragile5', V2);
  const throwing = `export const upgradeState = (path) => { throw new Error('cannot map ' + path.join('.')); };
export const upgradeContext = (oldPaths, newPaths, context) => context;`;
  await migrationOf('fragile5', v1, v2, throwing);
  await client.machineInstances.create('fragile5', { slug: 'f' });
  await client.machineInstances.admin.updateDesiredVersion('fragile5', 'f', { targetMachineVersionId: v2 });
  const failed = await call(node.url, 'POST', '/machines/fragile5/i/f/events', { token: admin, body: { event: 'PAUSE' } });
  t.equal(failed.status, 400);
  t.equal(failed.body.code, 'machine-code-error');
  t.match(failed.body.error, /upgrading from ver_\S+ to ver_\S+ failed, the instance stays on ver_\S+: .*cannot map on\.playing/);
  t.match(await client.machineInstances.admin.get('fragile5', 'f'), { state: { on: 'playing' }, machineVersion: { id: v1 }, desiredMachineVersion: { id: v2 } }, 'untouched, still pending');
  t.same((await client.machineInstances.listTransitions('fragile5', 'f')).transitions.map((tr) => tr.event.type), ['xstate.init'], 'nothing in the history');

  // Cancel it (target = current version), then try a migration whose paths are no state of v2.
  await client.machineInstances.admin.updateDesiredVersion('fragile5', 'f', { targetMachineVersionId: v1 });
  t.same((await client.machineInstances.sendEvent('fragile5', 'f', { event: 'PAUSE' })).state, { on: 'paused' }, 'with the upgrade cancelled the event runs on v1');
  const v3 = await versionOf('fragile5', V2);
  await migrationOf('fragile5', v1, v3, `export const upgradeState = () => ['nowhere', 'at-all'];
export const upgradeContext = (oldPaths, newPaths, context) => context;`);
  await client.machineInstances.admin.updateDesiredVersion('fragile5', 'f', { targetMachineVersionId: v3 });
  const nowhere = await call(node.url, 'POST', '/machines/fragile5/i/f/events', { token: admin, body: { event: 'PLAY' } });
  t.equal(nowhere.status, 400, 'a path the new machine does not have');
  t.equal(nowhere.body.code, 'machine-code-error');
  t.match(nowhere.body.error, /stays on ver_\S+: .*nowhere/);
  t.match(await client.machineInstances.admin.get('fragile5', 'f'), { state: { on: 'paused' }, machineVersion: { id: v1 }, desiredMachineVersion: { id: v3 } });

  let lines: string[] = [];
  for (let i = 0; i < 40 && lines.length < 2; i++) {
    lines = (await client.logs.retrieve(new Date(Date.now() - 60_000), { machineName: 'fragile5', instanceName: 'f' })).logs.map((l) => l.log).filter((l) => /upgrading from/.test(l));
    if (lines.length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.equal(lines.length, 2, 'both failures are in the instance\'s logs');
});
