import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import WebSocket from 'ws';
import { call } from './helpers/http.js';
import { startNode, testDeployment } from './helpers/node-process.js';

/** GET /usage: the reads and transitions a test performed, per month and machine (wire-protocol §8.6). */

const ADMIN = 'usage-admin';
const counter = `import { createMachine, assign } from "xstate";
export default createMachine({ id: "c", predictableActionArguments: true, initial: "on", context: { n: 0, blob: "" },
  states: { on: { on: {
    INC: { actions: assign({ n: (c) => c.n + 1 }) },
    BIG: { actions: assign({ blob: () => "x".repeat(250 * 1024) }) },
  } } } });
export const allowRead = ({ authContext }) => authContext.sub !== "nobody";
export const allowWrite = () => true;
`;

t.test('usage counts what was done', async (t) => {
  const node = await startNode({ args: ['--admin-key', ADMIN], generatedAdminKey: true });
  t.teardown(() => node.stop());
  const operator = new StateBackedClient(ADMIN, { apiHost: node.url });
  for (const machine of ['alpha', 'beta']) {
    await operator.machines.create(machine);
    await operator.machineVersions.create(machine, { clientInfo: machine, makeCurrent: true, code: counter });
  }
  const empty = await call(node.url, 'GET', '/usage', { token: ADMIN });
  t.equal(empty.status, 200);
  const month = new Date().toISOString().slice(0, 7);
  t.same(empty.body.usage, [{ month, transitions: 0, reads: 0, machines: [] }], 'the current month, empty');
  t.equal(empty.body.currentMonth, month);
  t.match(empty.body.limits, { monthlyEventsLimit: Number, monthlyReadsLimit: Number });

  await operator.machineInstances.create('alpha', { slug: 'a1' });
  await operator.machineInstances.create('alpha', { slug: 'a2' });
  await operator.machineInstances.create('beta', { slug: 'b1' });
  for (let i = 0; i < 3; i++) await operator.machineInstances.sendEvent('alpha', 'a1', { event: 'INC' });
  await operator.machineInstances.sendEvent('beta', 'b1', { event: 'BIG' }); // 250 KB of context: 1 + 2
  await operator.machineInstances.get('alpha', 'a1');
  await operator.machineInstances.get('alpha', 'a1');
  await operator.machineInstances.get('beta', 'b1');
  await operator.machineInstances.admin.get('beta', 'b1');
  const refused = await call(node.url, 'GET', '/machines/alpha/i/a1', {
    token: ADMIN,
    headers: { 'x-statebacked-act': JSON.stringify({ sub: 'nobody' }) },
  });
  t.equal(refused.status, 403, 'a refused read counts nothing');

  // A realtime subscription's first state is a read; the updates it pushes are not.
  const socket = new WebSocket(`ws://127.0.0.1:${node.port}/rt?token=${ADMIN}`);
  const frames: unknown[] = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data))));
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ type: 'subscribe-to-instance', requestId: 'r', machineName: 'alpha', machineInstanceName: 'a2' }));
  for (let i = 0; i < 100 && frames.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  await operator.machineInstances.sendEvent('alpha', 'a2', { event: 'INC' });
  for (let i = 0; i < 100 && frames.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(frames.length, 2);
  socket.close();

  // (a cluster node's counts reach the others within a second: docs/behaviour.md, Usage)
  if (testDeployment === 'cluster') await new Promise((resolve) => setTimeout(resolve, 1_500));
  const { body } = await call(node.url, 'GET', '/usage', { token: ADMIN });
  t.same(
    body.usage,
    [
      {
        month,
        transitions: 2 + 3 + 1 + 1 + 3,
        reads: 2 + 1 + 1 + 1,
        machines: [
          { machine: 'alpha', transitions: 2 + 3 + 1, reads: 3 },
          { machine: 'beta', transitions: 1 + 3, reads: 2 },
        ],
      },
    ],
    'creates, events (a 250 KB context counts 3), reads, admin reads and a subscription',
  );

  t.equal((await call(node.url, 'GET', '/usage?months=0', { token: ADMIN })).status, 400);
  t.match((await call(node.url, 'GET', '/usage?months=x', { token: ADMIN })).body, { code: 'invalid-parameter', parameter: 'months' });
  t.equal((await call(node.url, 'GET', '/usage')).status, 403, 'a credential is needed');
  const { signToken } = await import('@statebacked/token');
  const tokenOf = async (scopes: string[] | undefined) => {
    const key = await operator.keys.create({
      name: `k-${scopes?.join('-') ?? 'ci'}`,
      ...(scopes ? { scopes: scopes as any } : { use: 'ci' }),
    });
    return signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: 'k' }, { expires: { in: '1h' } });
  };
  t.match(
    (await call(node.url, 'GET', '/usage', { token: await tokenOf(undefined) })).body,
    { code: 'missing-scope' },
    'a ci key has no org.read',
  );
  const reader = await call(node.url, 'GET', '/usage', { token: await tokenOf(['org.read']) });
  t.equal(reader.status, 200);
  t.equal(reader.body.usage[0].transitions, 10, 'the same figures for a key of the org');
});
