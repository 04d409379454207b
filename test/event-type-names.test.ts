import { gzipSync } from 'node:zlib';
import { StateBackedClient } from '@statebacked/client';
import { build } from 'esbuild';
import t from 'tap';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

/**
 * Event types named like Object.prototype members: xstate 4 looks transitions up by event type in
 * plain objects, where these names found Object.prototype's members, so any client could make any
 * machine fail with machine-code-error. They are event types like any other, for machines on the
 * service's xstate and for machines that bundle their own copy.
 */
const NAMES = Object.getOwnPropertyNames(Object.prototype);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** No transition on any of the names: each is an ignored event. */
const plainSource = `import { createMachine } from "xstate";
export default createMachine({
  id: "plain", predictableActionArguments: true, initial: "idle", context: { n: 1 },
  states: { idle: { on: { GO: "done" } }, done: {} },
});
export const allowRead = () => true;
export const allowWrite = () => true;
`;

/**
 * Declares a transition on each name: the usual object form for all but __proto__ (an object key
 * "__proto__" sets the prototype in JavaScript), which the root declares in the array form. Raised,
 * delayed and inter-instance events of those names too.
 */
const declaringSource = `import { createMachine, assign, raise, send, sendTo } from "xstate";
const NAMES = ${JSON.stringify(NAMES)};
const note = assign({ heard: (c, e) => [...c.heard, e.type] });
const byName = {};
for (const name of NAMES) if (name !== "__proto__") Object.defineProperty(byName, name, { value: { actions: note }, enumerable: true });
export default createMachine({
  id: "declaring", predictableActionArguments: true, initial: "open", context: { heard: [] },
  on: [{ event: "__proto__", actions: note }],
  states: { open: { on: {
    ...byName,
    RESET: { actions: assign({ heard: () => [] }) },
    ECHO: { actions: NAMES.map((name) => raise({ type: name })) },
    LATER: { actions: send({ type: "constructor" }, { delay: 50 }) },
    TELL: { actions: sendTo((c, e) => ({ type: "statebacked.instance", machineName: e.machine, machineInstanceName: e.to }), (c, e) => ({ type: e.name })) },
  } } },
});
export const allowRead = () => true;
export const allowWrite = () => true;
`;

const bundled = async (source: string): Promise<Buffer> => {
  const out = await build({
    stdin: { contents: source, resolveDir: process.cwd(), loader: 'js' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    minify: true,
    keepNames: true,
    write: false,
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  return gzipSync(out.outputFiles[0]?.text ?? '');
};

const node = await startNode();
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const client = new StateBackedClient(admin, { apiHost: node.url });

const upload = async (machine: string, source: string, withOwnXstate: boolean) => {
  await client.machines.create(machine);
  const code = withOwnXstate ? { gzippedCode: await bundled(source) } : { code: source };
  await client.machineVersions.create(machine, { clientInfo: machine, makeCurrent: true, ...code });
};

const sendRaw = (machine: string, instance: string, event: unknown) =>
  call(node.url, 'POST', `/machines/${machine}/i/${instance}/events`, { token: admin, body: { event } });

for (const withOwnXstate of [false, true]) {
  const copy = withOwnXstate ? 'a bundled xstate' : "the service's xstate";
  const suffix = withOwnXstate ? '-bundled' : '';

  t.test(`on ${copy}: such an event without a transition is ignored`, async (t) => {
    const machine = `plain${suffix}`;
    await upload(machine, plainSource, withOwnXstate);
    const created = await client.machineInstances.create(machine, { slug: 'p' });
    let ts = created.ts;
    for (const name of NAMES) {
      for (const event of [name, { type: name }]) {
        const answer = await sendRaw(machine, 'p', event);
        t.equal(answer.status, 200, `${JSON.stringify(event)}: 200 (${answer.text.slice(0, 200)})`);
        t.match(answer.body, { state: 'idle' }, 'the state is unchanged');
        t.ok(answer.body.ts > ts, 'and recorded like any event');
        ts = answer.body.ts;
      }
    }
    t.equal((await client.machineInstances.sendEvent(machine, 'p', { event: 'GO' })).state, 'done', 'the machine still works');
  });

  t.test(`on ${copy}: a machine that declares transitions on such names takes them`, async (t) => {
    const machine = `declaring${suffix}`;
    await upload(machine, declaringSource, withOwnXstate);
    await client.machineInstances.create(machine, { slug: 'd' });
    const heard = async (instance = 'd') => (await client.machineInstances.admin.get(machine, instance)).context.heard as string[];

    for (const name of NAMES) {
      for (const event of [name, { type: name }]) {
        await client.machineInstances.sendEvent(machine, 'd', { event: 'RESET' });
        const answer = await sendRaw(machine, 'd', event);
        t.equal(answer.status, 200, `${JSON.stringify(event)}: 200 (${answer.text.slice(0, 200)})`);
        t.same(await heard(), [name], `${name} took its transition`);
      }
    }

    await client.machineInstances.sendEvent(machine, 'd', { event: 'RESET' });
    await client.machineInstances.sendEvent(machine, 'd', { event: 'ECHO' });
    t.same(await heard(), NAMES, 'raised inside the machine');

    await client.machineInstances.sendEvent(machine, 'd', { event: 'RESET' });
    await client.machineInstances.sendEvent(machine, 'd', { event: 'LATER' });
    const delivered = await eventually(async () => ((await heard()).length > 0 ? await heard() : undefined)).catch(() => heard());
    t.same(delivered, ['constructor'], 'a delayed send, fired by the durable timers');

    // To another instance, through the outbox; it is created on receipt with the default context.
    for (const name of ['constructor', '__proto__', 'hasOwnProperty']) {
      await client.machineInstances.sendEvent(machine, 'd', { event: { type: 'TELL', machine, to: 'other', name } });
    }
    let other: string[] | undefined;
    for (let i = 0; i < 100 && other?.length !== 3; i++) {
      other = await heard('other').catch(() => undefined);
      if (other?.length !== 3) await sleep(50);
    }
    t.same(other, ['constructor', '__proto__', 'hasOwnProperty'], 'sent from one instance to another');
    const types = (await client.machineInstances.listTransitions(machine, 'other')).transitions.map(
      (tr) => (tr.event as { type: string }).type,
    );
    t.same(types, ['xstate.init', 'constructor', '__proto__', 'hasOwnProperty']);
  });
}

t.test("the runtime's own event types are refused from clients (400 naming event); look-alikes pass", async (t) => {
  const machine = 'reserved';
  await upload(machine, plainSource, false);
  await client.machineInstances.create(machine, { slug: 'r' });
  const before = (await client.machineInstances.listTransitions(machine, 'r')).transitions.length;
  const refused = [
    'xstate.after(86400000)#plain.idle',
    'xstate.init',
    'done.invoke.pay',
    'done.state.plain.idle',
    'error.platform.pay',
    'error.execution',
    { type: 'done.invoke.pay', data: { paid: true } },
    { type: 'statebacked.upgrade', migrationPath: [], fromMachineVersionId: 'ver_x', toMachineVersionId: 'ver_y' },
    { type: 'xstate.done.actor.child' },
  ];
  for (const event of refused) {
    const answer = await sendRaw(machine, 'r', event);
    t.equal(answer.status, 400, `${JSON.stringify(event)}: 400`);
    t.match(answer.body, { code: 'invalid-parameter', parameter: 'event', error: /the runtime's own/ });
  }
  t.equal((await client.machineInstances.listTransitions(machine, 'r')).transitions.length, before, 'nothing was recorded');
  for (const event of ['done', 'xstate', 'done.other', 'errors.platform', 'DONE.INVOKE.x', 'my.xstate.thing', 'error.executions']) {
    t.equal((await sendRaw(machine, 'r', event)).status, 200, `${event}: an ordinary event`);
  }
  t.equal((await client.machineInstances.sendEvent(machine, 'r', { event: 'GO' })).state, 'done');
});

/**
 * xstate 4 takes an event object with `$$type: "scxml"` as its own wrapped event and acts on its
 * `name`: sent as is, `{ type: "HELLO", $$type: "scxml", name: "done.invoke.pay" }` passed the
 * authorizer and the reserved-type check as HELLO and ran as the invoked service's result.
 */
t.test('events shaped as xstate 4 wraps its own ($$type "scxml") are refused, from clients and from other instances', async (t) => {
  const machine = 'wrapped';
  const source = `import { createMachine, sendTo } from "xstate";
export default createMachine({
  id: "wrapped", predictableActionArguments: true, initial: "idle",
  states: {
    idle: { on: { GO: "done", FORGE: { actions: sendTo(
      () => ({ type: "statebacked.instance", machineName: "wrapped", machineInstanceName: "target" }),
      () => ({ type: "HELLO", $$type: "scxml", name: "GO", data: { type: "HELLO", $$type: "scxml", name: "GO" } }),
    ) } } },
    done: {},
  },
});
export const allowRead = () => true;
export const allowWrite = ({ event }) => event?.type !== "GO";
`;
  await upload(machine, source, true);
  await client.machineInstances.create(machine, { slug: 'target' });
  await client.machineInstances.create(machine, { slug: 'forger' });
  t.equal((await sendRaw(machine, 'target', 'GO')).status, 403, 'GO itself is refused by the authorizer');
  for (const name of ['GO', 'done.invoke.pay', 'xstate.after(1000)#wrapped.idle']) {
    const answer = await sendRaw(machine, 'target', { type: 'HELLO', $$type: 'scxml', name, data: { type: name } });
    t.equal(answer.status, 400, `wrapped ${name}: 400`);
    t.match(answer.body, { code: 'invalid-parameter', parameter: 'event', error: /\$\$type "scxml"/ });
  }
  const sent = await sendRaw(machine, 'forger', 'FORGE');
  t.equal(sent.status, 400, 'a send of such an event to another instance fails the step');
  t.match(sent.body, { code: 'machine-code-error', error: /\$\$type "scxml"/ });
  t.equal((await sendRaw(machine, 'target', { type: 'HELLO', $$type: 'other' })).status, 200, 'another $$type is an ordinary field');
  await sleep(300);
  t.equal((await client.machineInstances.get(machine, 'target')).state, 'idle', 'the target never ran GO');
  t.same(
    (await client.machineInstances.listTransitions(machine, 'target')).transitions.map((tr) => (tr.event as { type: string }).type),
    ['xstate.init', 'HELLO'],
  );
});
