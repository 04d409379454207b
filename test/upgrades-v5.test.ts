import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { startNode } from './helpers/node-process.js';
import { eventType } from './helpers/transitions.js';
import { M12, upgradeHelpers, upgradeScenarios } from './helpers/upgrade-scenarios.js';
import { importing5 } from './fixtures/xstate-v5/machines.js';

/**
 * Instance upgrades of XState v5 machines with the real client (wire-protocol §8.5,
 * docs/migrations.md): the v5 form of upgrades.test.ts's player, a chain of two migrations, a
 * nested state with a history state; and an instance of a v4 version upgraded to a v5 one. On
 * whichever deployment the tests run against.
 */
const node = await startNode();
t.teardown(() => node.stop());
const client = new StateBackedClient(node.adminKey as string, { apiHost: node.url });

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
const renamed = (extra: string) =>
  importing5(`export default createMachine({ id: 'player', initial: 'powered', context: { level: 0 },
  states: {
    powered: { initial: 'running', states: { running: { on: { PAUSE: 'held' } }, held: { on: { PLAY: 'running' } }, hist: { type: 'history' } }, on: { OFF: 'standby' } },
    standby: { on: { ON: 'powered.hist', WAKE: { target: 'powered.running', actions: assign({ woken: true }) } } },
  } });
${extra}`);
const V2 = renamed('');
const V3 = renamed('export const edition = 3;');
const { versionOf, migrationOf, pausedAndOff } = upgradeHelpers(client);

upgradeScenarios(node, client, { prefix: 'v5', V1, V2, V3 });

t.test('v4 → v5: an instance of a v4 version moves to a v5 one, keeping what its history state remembers', async (t) => {
  await client.machines.create('player45');
  const v1 = await versionOf('player45', V1_4, true);
  await pausedAndOff(t, 'player45', 'p');
  const v2 = await versionOf('player45', V2);
  const m12 = await migrationOf('player45', v1, v2, M12);
  await client.machineInstances.admin.updateDesiredVersion('player45', 'p', { targetMachineVersionId: v2 });

  t.same(
    (await client.machineInstances.sendEvent('player45', 'p', { event: 'ON' })).state,
    { powered: 'held' },
    'back where v4 had been, by its v5 name',
  );
  t.match(await client.machineInstances.admin.get('player45', 'p'), { machineVersion: { id: v2 }, context: { level: 30 } });
  const { transitions } = await client.machineInstances.listTransitions('player45', 'p');
  t.same(transitions.map(eventType), ['xstate.init', 'PAUSE', 'OFF', 'statebacked.upgrade', 'ON']);
  t.same(transitions[3]?.event, { type: 'statebacked.upgrade', migrationPath: [m12], fromMachineVersionId: v1, toMachineVersionId: v2 });
  await client.machineInstances.sendEvent('player45', 'p', { event: 'OFF' });
  t.same(
    (await client.machineInstances.sendEvent('player45', 'p', { event: 'WAKE' })).state,
    { powered: 'running' },
    'the v5 code runs the next events',
  );
  t.match((await client.machineInstances.admin.get('player45', 'p')).context, { woken: true, level: 30 }, "with v5's assign");
});
