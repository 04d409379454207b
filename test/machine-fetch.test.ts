import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { startNode } from './helpers/node-process.js';

const fetchingMachine = (url: string) => `import { createMachine, assign } from "xstate";
export default createMachine({
  id: "fetcher", predictableActionArguments: true, initial: "idle",
  context: { result: null, error: null, digest: null },
  states: {
    idle: { on: { GO: "fetching", HASH: "hashing" } },
    fetching: {
      invoke: {
        src: async () => { const res = await fetch(${JSON.stringify(url)}, { headers: { "x-from": "machine" } }); return { status: res.status, body: await res.json() }; },
        onDone: { target: "fetched", actions: assign({ result: (c, e) => e.data }) },
        onError: { target: "refused", actions: assign({ error: (c, e) => String(e.data && e.data.message) }) },
      },
    },
    hashing: {
      invoke: {
        src: async () => {
          const bytes = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("abc")));
          return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
        },
        onDone: { target: "idle", actions: assign({ digest: (c, e) => e.data }) },
      },
    },
    fetched: {}, refused: {},
  },
});
export const allowRead = () => true;
export const allowWrite = () => true;
`;

t.test('machine code fetches through the host: loopback refused by default, allowed when configured', async (t) => {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(String(req.headers['x-from']));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ hello: 'from loopback' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  const code = fetchingMachine(`http://127.0.0.1:${port}/data`);

  let defaultClient: StateBackedClient | undefined;
  for (const [label, args] of [
    ['default', []],
    ['allowed', ['--fetch-allow', `127.0.0.1:${port}`]],
  ] as const) {
    const node = await startNode({ args: [...args] });
    t.teardown(() => node.stop());
    const client = new StateBackedClient(node.adminKey as string, { apiHost: node.url });
    if (label === 'default') defaultClient = client;
    await client.machines.create('fetcher');
    await client.machineVersions.create('fetcher', { clientInfo: label, makeCurrent: true, code });
    await client.machineInstances.create('fetcher', { slug: 'f' });
    const answered = await client.machineInstances.sendEvent('fetcher', 'f', { event: 'GO' });
    const { context } = await client.machineInstances.admin.get('fetcher', 'f');
    if (label === 'default') {
      t.equal(answered.state, 'refused', 'default: the fetch is refused');
      t.match(context.error, /loopback/, 'and the machine is told why');
    } else {
      t.equal(answered.state, 'fetched', 'allow-listed: the create/send waited for the fetch to settle');
      t.same(context.result, { status: 200, body: { hello: 'from loopback' } });
    }
  }
  t.same(seen, ['machine'], 'only the allowed node reached the server');

  // On the default node (its machine has the code already): crypto needs no allow-list.
  const client = defaultClient as StateBackedClient;
  await client.machineInstances.create('fetcher', { slug: 'h' });
  await client.machineInstances.sendEvent('fetcher', 'h', { event: 'HASH' });
  t.equal(
    (await client.machineInstances.admin.get('fetcher', 'h')).context.digest,
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    'crypto.subtle.digest works',
  );
});
