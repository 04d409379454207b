import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { startNode } from './helpers/node-process.js';
import { upgradeScenarios } from './helpers/upgrade-scenarios.js';

/**
 * Instance upgrades of XState v4 machines with the real client (wire-protocol §8.5): the scenarios of
 * test/helpers/upgrade-scenarios.ts, on whichever deployment the tests run against.
 */
const node = await startNode();
t.teardown(() => node.stop());
const client = new StateBackedClient(node.adminKey as string, { apiHost: node.url });

// v1: a player that is on (playing or paused, remembered by a history state) or off.
const V1 = `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'player', predictableActionArguments: true, initial: 'on', context: { volume: 3 },
  states: {
    on: { initial: 'playing', states: { playing: { on: { PAUSE: 'paused' } }, paused: { on: { PLAY: 'playing' } }, hist: { type: 'history' } }, on: { OFF: 'off' } },
    off: { on: { ON: 'on.hist' } },
  } });
export const allowRead = () => true;
export const allowWrite = () => true;`;
// v2 and v3: the same player renamed (powered.{running,held}, standby), with a volume level, and WAKE, which v1 lacks.
const renamed = (extra: string) => `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'player', predictableActionArguments: true, initial: 'powered', context: { level: 0 },
  states: {
    powered: { initial: 'running', states: { running: { on: { PAUSE: 'held' } }, held: { on: { PLAY: 'running' } }, hist: { type: 'history' } }, on: { OFF: 'standby' } },
    standby: { on: { ON: 'powered.hist', WAKE: { target: 'powered.running', actions: assign({ woken: true }) } } },
  } });
export const allowRead = () => true;
export const allowWrite = () => true;
${extra}`;
const V2 = renamed('');
const V3 = renamed('export const edition = 3;');
upgradeScenarios(node, client, { prefix: 'v4', V1, V2, V3 });
