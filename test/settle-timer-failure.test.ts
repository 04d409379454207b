/**
 * A delayed event that comes due while a step settles (here: while the child the step started still
 * runs) is an event of its own (docs/behaviour.md):
 * when its machine code fails, the step that scheduled it still commits, and the delayed event is
 * retried by the durable timers, then dropped, as one that fails outside settling is. It had failed
 * the whole request instead: the triggering event answered 400 and was undone.
 */
import { gzipSync } from 'node:zlib';
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { bundleLikeSmply } from './helpers/bundle.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const node = await startNode({ args: ['--timer-retry-ms', '100'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const client = new StateBackedClient(admin, { apiHost: node.url });
const since = new Date(Date.now() - 1_000).toISOString();

for (const [major, source] of [
  [
    4,
    `import { createMachine, assign } from "xstate";
export default createMachine({ id: "m", predictableActionArguments: true, initial: "a", context: { n: 0 }, states: {
  a: { on: { GO: { target: "b", actions: assign({ n: () => 0 }) } } },
  b: { after: { 100: { target: "c", cond: (c) => { if (c.n === 0) throw new Error("not yet"); return true; } } },
       invoke: { src: () => new Promise((resolve) => setTimeout(resolve, 400)) },
       on: { ARM: { actions: assign({ n: () => 1 }) } } },
  c: {},
} });`,
  ],
  [
    5,
    `import { createMachine, assign, fromPromise } from "xstate";
export default createMachine({ id: "m", initial: "a", context: { n: 0 }, states: {
  a: { on: { GO: { target: "b", actions: assign({ n: () => 0 }) } } },
  b: { after: { 100: { target: "c", guard: ({ context }) => { if (context.n === 0) throw new Error("not yet"); return true; } } },
       invoke: { src: fromPromise(() => new Promise((resolve) => setTimeout(resolve, 400))) },
       on: { ARM: { actions: assign({ n: () => 1 }) } } },
  c: {},
} });`,
  ],
] as const) {
  t.test(`xstate ${major}: the step commits; the failing delayed event is retried, then dropped`, async (t) => {
    const machine = `settling${major}`;
    await client.machines.create(machine);
    const code = `${source}\nexport const allowRead = () => true;\nexport const allowWrite = () => true;\n`;
    const { machineVersionId } = await client.machineVersions.create(machine, {
      clientInfo: 'v1',
      makeCurrent: true,
      ...(major === 5 ? { gzippedCode: gzipSync(await bundleLikeSmply(code, { xstate5: true })) } : { code }),
    });
    await client.machineInstances.create(machine, { slug: 'one' });
    const go = await call(node.url, 'POST', `/machines/${machine}/i/one/events`, { token: admin, body: { event: 'GO' } });
    t.equal(go.status, 200, `GO answered ${go.status} ${go.text.slice(0, 200)}`);
    t.equal(go.body.state, 'b', 'in the state GO took it to');
    const types = async () =>
      (await client.machineInstances.listTransitions(machine, 'one')).transitions.map((tr) => (tr.event as { type: string }).type);
    t.same(await types(), ['xstate.init', 'GO'], 'GO is in the history');
    let entries: Array<{ log: string; machineVersionId: string }> = [];
    let lines: string[] = [];
    for (let i = 0; i < 100 && !lines.some((l) => /dropped delayed event/.test(l)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const page = await call(node.url, 'GET', `/logs?from=${encodeURIComponent(since)}&machine=${machine}`, { token: admin });
      entries = page.body.logs as typeof entries;
      lines = entries.map((entry) => entry.log);
    }
    t.same(
      [...new Set(entries.map((entry) => entry.machineVersionId))],
      [machineVersionId],
      "the service's lines are filed under the instance's version (a filter by version finds them)",
    );
    t.ok(
      lines.some((l) => /failed as it fired while the step settled: .*not yet.*retried/.test(l)),
      'the failure while settling is logged',
    );
    t.ok(
      lines.some((l) => /dropped delayed event/.test(l)),
      'the durable timers retried it, then dropped it',
    );
    t.equal((await client.machineInstances.get(machine, 'one')).state, 'b', 'the instance stays where GO took it');
    const armed = await call(node.url, 'POST', `/machines/${machine}/i/one/events`, { token: admin, body: { event: 'ARM' } });
    t.equal(armed.status, 200, 'and takes events');
    // (the child the dropped actor ran was stopped with it: its error event comes before the next one)
    t.same(await types(), ['xstate.init', 'GO', major === 4 ? 'error.platform.m.b:invocation[0]' : 'xstate.error.actor.0.m.b', 'ARM']);
  });
}
