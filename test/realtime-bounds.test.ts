/**
 * The node-wide bounds of `/rt` (docs/realtime.md, Limits): sockets open at once, subscriptions on all
 * sockets together, sockets that hold no subscription, and frames a socket may send, each on a node
 * started with small bounds, over raw sockets.
 */
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import WebSocket from 'ws';
import { realtimeMachine } from './fixtures/realtime-machines.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';

const ADMIN = 'rt-bounds-admin';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const node = await startNode({
  args: ['--admin-key', ADMIN, '--rt-max-sockets', '4', '--rt-max-node-subscriptions', '4', '--rt-unsubscribed-close-seconds', '2'],
  generatedAdminKey: true,
});
t.teardown(() => node.stop());

const operator = new StateBackedClient(ADMIN, { apiHost: node.url });
await operator.machines.create('rt');
await operator.machineVersions.create('rt', { clientInfo: 'rt', makeCurrent: true, code: realtimeMachine });
for (const slug of ['a', 'b', 'c', 'd']) await operator.machineInstances.create('rt', { slug });

const until = async (what: string, check: () => boolean, ms = 8_000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
};

interface Raw {
  socket: WebSocket;
  frames: any[];
  closed?: { code: number; reason: string };
  subscribe: (instance: string, requestId: string) => void;
}

const open = async (token = ADMIN): Promise<Raw> => {
  const socket = new WebSocket(`ws://127.0.0.1:${node.port}/rt?token=${encodeURIComponent(token)}`);
  const raw: Raw = {
    socket,
    frames: [],
    subscribe: (instance, requestId) =>
      socket.send(JSON.stringify({ type: 'subscribe-to-instance', machineName: 'rt', machineInstanceName: instance, requestId })),
  };
  socket.on('message', (data) => raw.frames.push(JSON.parse(String(data))));
  socket.on('close', (code, reason) => (raw.closed = { code, reason: String(reason) }));
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  return raw;
};
const errorFor = (raw: Raw, requestId: string) => raw.frames.find((f) => f.type === 'error' && f.requestId === requestId);
const sockets = async () => (await call(node.url, 'GET', '/stats', { token: ADMIN })).body.realtime.sockets as number;
const closeAll = async (raws: Raw[]) => {
  for (const raw of raws) raw.socket.terminate();
  await until('the node to see them closed', () => raws.every((r) => r.closed !== undefined));
  await sleep(50);
};

t.test('a socket without a token is told so on its subscribe, naming where the token goes', async (t) => {
  const bare = await open('');
  bare.subscribe('a', 'bare');
  await until('its answer', () => errorFor(bare, 'bare') !== undefined);
  t.match(errorFor(bare, 'bare'), { status: 403, code: 'unauthorized', message: /carries no token: connect to \/rt\?token=/ });
  await closeAll([bare]);
});

t.test('subscriptions on all sockets together: one past the bound gets 503, and a freed place is taken again', async (t) => {
  const [one, two] = [await open(), await open()];
  one.subscribe('a', 's1');
  one.subscribe('b', 's2');
  two.subscribe('c', 's3');
  two.subscribe('d', 's4');
  await until('four first states', () => one.frames.length + two.frames.length === 4);
  two.subscribe('a', 's5');
  await until('the fifth answered', () => errorFor(two, 's5') !== undefined);
  t.match(errorFor(two, 's5'), { status: 503, code: 'unavailable', message: /as many realtime subscriptions as it may \(4\)/ });
  one.socket.send(JSON.stringify({ type: 'unsubscribe-from-instance', machineName: 'rt', machineInstanceName: 'b', requestId: 's2' }));
  await sleep(100);
  two.subscribe('b', 's6');
  await until('the sixth answered', () => two.frames.some((f) => f.machineInstanceName === 'b' || f.requestId === 's6'));
  t.notOk(errorFor(two, 's6'), 'an unsubscribe frees its place');
  await closeAll([one]);
  const three = await open();
  three.subscribe('a', 's7');
  await until('the seventh answered', () => three.frames.length > 0);
  t.match(three.frames[0], { type: 'instance-update', machineInstanceName: 'a' }, 'a closed socket frees its places');
  await closeAll([two, three]);
});

t.test('a socket that holds no subscription is closed after --rt-unsubscribed-close-seconds; one that holds one stays', async (t) => {
  const idle = await open('no token at all');
  const busy = await open();
  busy.subscribe('a', 'kept');
  await until('the idle socket closed', () => idle.closed !== undefined, 6_000);
  t.same(idle.closed, { code: 1000, reason: 'no subscription' });
  await sleep(2_500);
  t.equal(busy.closed, undefined, 'the subscribed socket is still open');
  await closeAll([busy]);
});

t.test(
  'sockets beyond --rt-max-sockets: subscribes answered 503 and closed with 1013; past a tenth more (16), the upgrade gets 503',
  async (t) => {
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await open());
    for (const [i, raw] of held.entries()) raw.subscribe('a', `h${i}`);
    const beyond = await open();
    beyond.subscribe('b', 'over');
    await until('its answer', () => errorFor(beyond, 'over') !== undefined);
    t.match(errorFor(beyond, 'over'), { status: 503, code: 'unavailable', message: /as many realtime connections as it may \(4\)/ });
    const overflow = [beyond];
    for (let i = 0; i < 15; i++) overflow.push(await open());
    const refused = await new Promise<number>((resolve) => {
      const socket = new WebSocket(`ws://127.0.0.1:${node.port}/rt?token=${ADMIN}`);
      socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.on('open', () => resolve(101));
      socket.on('error', () => undefined);
    });
    t.equal(refused, 503, 'the upgrade past 4 + 16 is refused');
    t.equal((await call(node.url, 'GET', '/health')).status, 200, 'HTTP is served meanwhile');
    await until('the refused sockets closed', () => overflow.every((r) => r.closed !== undefined), 15_000);
    t.same(beyond.closed, { code: 1013, reason: 'the node holds as many connections as it may' });
    t.ok(
      held.every((r) => r.closed === undefined),
      'the sockets within the bound stay open',
    );
    await closeAll(held);
    t.equal(await sockets(), 0);
  },
);

t.test('a client with thousands of subscribers keeps its one socket: every frame is answered, none closes it', async (t) => {
  const upgradesBefore = (await call(node.url, 'GET', '/stats', { token: ADMIN })).body.realtime.upgrades as number;
  const client = new StateBackedClient(ADMIN, { apiHost: node.url, WebSocket: WebSocket as any });
  const errors: unknown[] = [];
  const updates: unknown[] = [];
  const unsubscribes = Array.from({ length: 2_100 }, () =>
    client.machineInstances.subscribe(
      'rt',
      'a',
      (update) => updates.push(update),
      (error) => errors.push(error),
    ),
  );
  // (4 are admitted, the node's bound; the client hands each update to every subscriber of the instance)
  await until('every refused subscribe answered', () => errors.length >= 2_096, 20_000);
  await sleep(1_000);
  const stats = (await call(node.url, 'GET', '/stats', { token: ADMIN })).body.realtime;
  t.equal(stats.upgrades - upgradesBefore, 1, 'one socket, never reconnected');
  t.ok(updates.length > 0, 'the state came');
  t.equal(errors.length, 2_096, 'the others refused in-band (503, then 429 past the socket rate)');
  for (const unsubscribe of unsubscribes) unsubscribe();
});
