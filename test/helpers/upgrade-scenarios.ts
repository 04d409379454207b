import type { StateBackedClient } from '@statebacked/client';
import t, { type Test } from 'tap';
import { call } from './http.js';
import type { NodeProcess } from './node-process.js';
import { eventType } from './transitions.js';

/**
 * The upgrade scenarios both xstate majors must pass (test/upgrades.test.ts for v4,
 * test/upgrades-v5.test.ts for v5), with the real client: a player on v1 (on: playing | paused with
 * a history state, or off), then v2 and v3, the same player renamed (powered.{running,held},
 * standby) with a level in its context and WAKE, which v1 lacks; migrations M12 and M23 between them.
 */
export interface PlayerVersions {
  /** Names the machines apart when both files run on one deployment. */
  prefix: string;
  V1: string;
  V2: string;
  V3: string;
}

export const M12 = `const names = { on: 'powered', playing: 'running', paused: 'held', off: 'standby' };
export const upgradeState = (path) => path.map((name) => names[name] ?? name);
export const upgradeContext = (oldPaths, newPaths, context) => ({ level: context.volume * 10 });`;
export const M23 = `export const upgradeState = (path) => path;
export const upgradeContext = (oldPaths, newPaths, context) => ({ ...context, edition: 3 });`;

export const upgradeHelpers = (client: StateBackedClient) => {
  const versionOf = async (machine: string, code: string, makeCurrent = false) =>
    (await client.machineVersions.create(machine, { clientInfo: 'v', makeCurrent, code })).machineVersionId;
  const migrationOf = async (machine: string, from: string, to: string, code: string) =>
    (
      (await client.machineVersionMigrations.create(machine, { fromMachineVersionId: from, toMachineVersionId: to, code })) as {
        machineVersionMigrationId: string;
      }
    ).machineVersionMigrationId;
  /** An instance of `machine` on v1, paused then switched off: its history state remembers "paused". */
  const pausedAndOff = async (t: Test, machine: string, name: string) => {
    await client.machineInstances.create(machine, { slug: name });
    await client.machineInstances.sendEvent(machine, name, { event: 'PAUSE' });
    t.equal((await client.machineInstances.sendEvent(machine, name, { event: 'OFF' })).state, 'off', 'off, with "paused" remembered');
  };
  return { versionOf, migrationOf, pausedAndOff };
};

export const upgradeScenarios = (node: NodeProcess, client: StateBackedClient, { prefix, V1, V2, V3 }: PlayerVersions): void => {
  const admin = node.adminKey as string;
  const { versionOf, migrationOf, pausedAndOff } = upgradeHelpers(client);

  t.test(`${prefix} v1 → v2 → v3: the next event upgrades, history state and all, then runs on v3`, async (t) => {
    const player = `${prefix}-player`;
    await client.machines.create(player);
    const v1 = await versionOf(player, V1, true);
    await pausedAndOff(t, player, 'p');

    const v2 = await versionOf(player, V2);
    const v3 = await versionOf(player, V3);
    const m12 = await migrationOf(player, v1, v2, M12);
    const m23 = await migrationOf(player, v2, v3, M23);
    await client.machineInstances.admin.updateDesiredVersion(player, 'p', { targetMachineVersionId: v3 });
    t.match(
      await client.machineInstances.admin.get(player, 'p'),
      { machineVersion: { id: v1 }, desiredMachineVersion: { id: v3 } },
      'pending until an event comes',
    );

    const on = await client.machineInstances.sendEvent(player, 'p', { event: 'ON' });
    t.same(on.state, { powered: 'held' }, 'the history state went back to what v1 remembered, by its v3 name');
    const adminView = await client.machineInstances.admin.get(player, 'p');
    t.match(adminView, { machineVersion: { id: v3 }, context: { level: 30, edition: 3 } }, "on v3, with both migrations' contexts");
    t.notOk((adminView as { desiredMachineVersion?: unknown }).desiredMachineVersion, 'nothing pending any more');

    const { transitions } = await client.machineInstances.listTransitions(player, 'p');
    t.same(transitions.map(eventType), ['xstate.init', 'PAUSE', 'OFF', 'statebacked.upgrade', 'ON']);
    t.same(
      transitions[3]?.event,
      { type: 'statebacked.upgrade', migrationPath: [m12, m23], fromMachineVersionId: v1, toMachineVersionId: v3 },
      'the upgrade record names the chain',
    );
    t.equal(transitions[3]?.state, 'standby', 'and the upgraded state, before the event');

    await client.machineInstances.sendEvent(player, 'p', { event: 'PLAY' });
    t.same((await client.machineInstances.sendEvent(player, 'p', { event: 'OFF' })).state, 'standby');
    t.same(
      (await client.machineInstances.sendEvent(player, 'p', { event: 'ON' })).state,
      { powered: 'running' },
      'the rebuilt history goes on remembering on v3',
    );
    await client.machineInstances.sendEvent(player, 'p', { event: 'OFF' });
    const woken = await client.machineInstances.sendEvent(player, 'p', { event: 'WAKE' });
    t.same(woken.state, { powered: 'running' }, 'a transition v1 did not have works');
    t.match((await client.machineInstances.admin.get(player, 'p')).context, { woken: true, level: 30 });
  });

  t.test(
    `${prefix}: a migration that throws or maps to no state fails the event, leaves the instance on its version, and is logged`,
    async (t) => {
      const fragile = `${prefix}-fragile`;
      await client.machines.create(fragile);
      const v1 = await versionOf(fragile, V1, true);
      const v2 = await versionOf(fragile, V2);
      const throwing = `export const upgradeState = (path) => { console.warn('mapping', path); throw new Error('cannot map ' + path.join('.')); };
export const upgradeContext = (oldPaths, newPaths, context) => context;`;
      await migrationOf(fragile, v1, v2, throwing);
      await client.machineInstances.create(fragile, { slug: 'f' });
      await client.machineInstances.admin.updateDesiredVersion(fragile, 'f', { targetMachineVersionId: v2 });
      const failed = await call(node.url, 'POST', `/machines/${fragile}/i/f/events`, { token: admin, body: { event: 'PAUSE' } });
      t.equal(failed.status, 400);
      t.equal(failed.body.code, 'machine-code-error');
      t.match(failed.body.error, /upgrading from ver_\S+ to ver_\S+ failed, the instance stays on ver_\S+: .*cannot map on\.playing/);
      t.match(
        await client.machineInstances.admin.get(fragile, 'f'),
        { state: { on: 'playing' }, machineVersion: { id: v1 }, desiredMachineVersion: { id: v2 } },
        'untouched, still pending',
      );
      t.same(
        (await client.machineInstances.listTransitions(fragile, 'f')).transitions.map(eventType),
        ['xstate.init'],
        'nothing in the history',
      );

      // Cancel it (target = current version), then try a migration whose paths are no state of v2.
      await client.machineInstances.admin.updateDesiredVersion(fragile, 'f', { targetMachineVersionId: v1 });
      t.same(
        (await client.machineInstances.sendEvent(fragile, 'f', { event: 'PAUSE' })).state,
        { on: 'paused' },
        'with the upgrade cancelled the event runs on v1',
      );
      const v3 = await versionOf(fragile, V2);
      await migrationOf(
        fragile,
        v1,
        v3,
        `export const upgradeState = () => ['nowhere', 'at-all'];
export const upgradeContext = (oldPaths, newPaths, context) => context;`,
      );
      await client.machineInstances.admin.updateDesiredVersion(fragile, 'f', { targetMachineVersionId: v3 });
      const nowhere = await call(node.url, 'POST', `/machines/${fragile}/i/f/events`, { token: admin, body: { event: 'PLAY' } });
      t.equal(nowhere.status, 400, 'a path the new machine does not have');
      t.equal(nowhere.body.code, 'machine-code-error');
      t.match(nowhere.body.error, /stays on ver_\S+: .*nowhere/);
      t.match(await client.machineInstances.admin.get(fragile, 'f'), {
        state: { on: 'paused' },
        machineVersion: { id: v1 },
        desiredMachineVersion: { id: v3 },
      });

      let lines: string[] = [];
      for (let i = 0; i < 40 && lines.length < 2; i++) {
        lines = (await client.logs.retrieve(new Date(Date.now() - 60_000), { machineName: fragile, instanceName: 'f' })).logs
          .map((l) => l.log)
          .filter((l) => /upgrading from/.test(l));
        if (lines.length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      t.equal(lines.length, 2, "both failures are in the instance's logs");
      const ofV1 = (
        await client.logs.retrieve(new Date(Date.now() - 60_000), { machineName: fragile, instanceName: 'f', machineVersionId: v1 })
      ).logs.filter((l) => /upgrading from/.test(l.log));
      t.equal(ofV1.length, 2, 'filed under the version the instance stayed on');
      const said = (
        await client.logs.retrieve(new Date(Date.now() - 60_000), { machineName: fragile, instanceName: 'f', machineVersionId: v2 })
      ).logs.filter((l) => /mapping/.test(l.log));
      t.equal(said.length, 1, "what the failing migration logged is in the instance's logs, under the version it was upgrading to");
      t.match(said[0], { log: /mapping.*on.*playing/ });
    },
  );
};
