import { errors, StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import t from 'tap';
import WebSocket from 'ws';
import { childMachine, parentMachine } from './fixtures/instance-machines.js';
import { privateMachine, realtimeMachine } from './fixtures/realtime-machines.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { eventType } from './helpers/transitions.js';

/** The realtime websocket (/rt) through the real client with `ws` as its WebSocket, and raw frames. */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'rt-admin';

const node = await startNode({
  args: ['--admin-key', ADMIN, '--settle-timeout-ms', '500', '--rt-max-subscriptions', '5'],
  generatedAdminKey: true,
});
t.teardown(() => node.stop());

const operator = new StateBackedClient(ADMIN, { apiHost: node.url });
for (const [name, code] of [
  ['rt', realtimeMachine],
  ['private', privateMachine],
  ['parent', parentMachine],
  ['child', childMachine],
] as const) {
  await operator.machines.create(name);
  await operator.machineVersions.create(name, { clientInfo: name, makeCurrent: true, code });
}
const production = await operator.keys.create({ name: 'prod', use: 'production' });
const tokenFor = (sub: string) =>
  signToken({ stateBackedKeyId: production.id, stateBackedSecretKey: production.key }, { sub }, { expires: { in: '1h' } });
const clientFor = async (sub: string) => new StateBackedClient(await tokenFor(sub), { apiHost: node.url, WebSocket: WebSocket as any });

/** Waits until `check` passes, bounded in time. */
const until = async (what: string, check: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
};

// Counted per node: in a cluster deployment, the sum over its nodes.
const stats = async () => {
  const all = await Promise.all(
    (node.nodes ?? [node]).map(async ({ url }) => (await call(url, 'GET', '/stats', { token: ADMIN })).body.realtime),
  );
  return { sockets: all.reduce((sum, s) => sum + s.sockets, 0), upgrades: all.reduce((sum, s) => sum + s.upgrades, 0) };
};

/** A raw socket, for frames the client would never send. */
/** A socket straight to a node (in a cluster deployment its first: a proxy between would buffer on its own). */
const rawSocket = async (token: string, moreQuery = '') => {
  const socket = new WebSocket(`ws://127.0.0.1:${node.nodes?.[0]?.port ?? node.port}/rt?token=${encodeURIComponent(token)}${moreQuery}`);
  const frames: any[] = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  return { socket, frames, send: (value: unknown) => socket.send(typeof value === 'string' ? value : JSON.stringify(value)) };
};

type Update = { state: unknown; publicContext?: any; ts: number; tags: string[]; done: boolean };

t.test('a subscriber sees every update of 200 rapid events, in order, ending on the final state', async (t) => {
  const alice = await clientFor('alice');
  await alice.machineInstances.create('rt', { slug: 'rapid' });
  const updates: Update[] = [];
  const failures: unknown[] = [];
  const unsubscribe = alice.machineInstances.subscribe(
    'rt',
    'rapid',
    (update) => updates.push(update as Update),
    (error) => failures.push(error),
  );
  await until('the first state', () => updates.length === 1);
  t.same(updates[0]?.publicContext, { count: 0 }, 'the current state comes at once');
  const answers: Update[] = [];
  for (let i = 0; i < 200; i++) answers.push((await alice.machineInstances.sendEvent('rt', 'rapid', { event: 'INC' })) as Update);
  await until('200 updates', () => updates.length === 201);
  t.same(
    updates.map((u) => u.publicContext.count),
    Array.from({ length: 201 }, (_, i) => i),
    'every count, in order',
  );
  t.ok(
    updates.every((u, i) => i === 0 || u.ts > (updates[i - 1] as Update).ts),
    'ts strictly increases',
  );
  t.same(
    updates.slice(1).map((u) => u.ts),
    answers.map((a) => a.ts),
    'the same ts as each HTTP answer',
  );
  t.same(failures, []);
  unsubscribe();
  await until('the socket closes with the last subscriber', () => updates.length > 0);
  const before = updates.length;
  await alice.machineInstances.sendEvent('rt', 'rapid', { event: 'INC' });
  await sleep(200);
  t.equal(updates.length, before, 'no update after unsubscribe');
});

t.test('allowRead: refused at subscribe through onError, and revoked later', async (t) => {
  const owner = await clientFor('owner');
  await owner.machineInstances.create('rt', { slug: 'secret', context: { hidden: true } });
  const bob = await clientFor('bob');
  const bobUpdates: Update[] = [];
  const bobErrors: any[] = [];
  const stopBob = bob.machineInstances.subscribe(
    'rt',
    'secret',
    (u) => bobUpdates.push(u as Update),
    (e) => bobErrors.push(e),
  );
  await until('bob refused', () => bobErrors.length === 1);
  t.type(bobErrors[0], errors.RejectedByMachineAuthorizerError, 'the client maps the in-band error');
  t.equal(bobUpdates.length, 0, 'no data before or with the refusal');
  stopBob();

  // Visible to everyone, then hidden: subscribers other than the owner get an error and stop.
  await owner.machineInstances.sendEvent('rt', 'secret', { event: 'SHOW' });
  const carol = await clientFor('carol');
  const carolUpdates: Update[] = [];
  const carolErrors: any[] = [];
  const ownerUpdates: Update[] = [];
  const stopCarol = carol.machineInstances.subscribe(
    'rt',
    'secret',
    (u) => carolUpdates.push(u as Update),
    (e) => carolErrors.push(e),
  );
  const stopOwner = owner.machineInstances.subscribe('rt', 'secret', (u) => ownerUpdates.push(u as Update));
  await until('both subscribed', () => carolUpdates.length === 1 && ownerUpdates.length === 1);
  await owner.machineInstances.sendEvent('rt', 'secret', { event: 'INC' });
  await until('both updated', () => carolUpdates.length === 2 && ownerUpdates.length === 2);
  await owner.machineInstances.sendEvent('rt', 'secret', { event: 'HIDE' });
  await until('carol revoked', () => carolErrors.length === 1);
  t.type(carolErrors[0], errors.RejectedByMachineAuthorizerError);
  await owner.machineInstances.sendEvent('rt', 'secret', { event: 'INC' });
  await until('the owner keeps getting updates', () => ownerUpdates.length === 4);
  t.equal(carolUpdates.length, 2, 'carol got nothing once allowRead refused her');
  stopCarol();
  stopOwner();
});

t.test(
  '150 subscribers with distinct auth contexts (two batches of authorizer calls): all updated, then all but the owner refused',
  async (t) => {
    const owner = await clientFor('owner');
    await owner.machineInstances.create('rt', { slug: 'crowd' });
    const sockets = await Promise.all(Array.from({ length: 150 }, async (_, i) => rawSocket(await tokenFor(i === 0 ? 'owner' : `u${i}`))));
    sockets.forEach((raw, i) =>
      raw.send({ type: 'subscribe-to-instance', requestId: `c${i}`, machineName: 'rt', machineInstanceName: 'crowd' }),
    );
    await until('all subscribed', () => sockets.every((raw) => raw.frames.length === 1), 10_000);
    await owner.machineInstances.sendEvent('rt', 'crowd', { event: 'INC' });
    await until('all updated', () => sockets.every((raw) => raw.frames.length === 2), 10_000);
    t.ok(sockets.every((raw) => raw.frames[1].publicContext.count === 1));
    await owner.machineInstances.sendEvent('rt', 'crowd', { event: 'HIDE' });
    await until('all told', () => sockets.every((raw) => raw.frames.length === 3), 10_000);
    t.match(sockets[0]?.frames[2], { type: 'instance-update' }, 'the owner still reads');
    t.ok(
      sockets.slice(1).every((raw) => raw.frames[2].type === 'error' && raw.frames[2].status === 403),
      'every other one refused',
    );
    for (const raw of sockets) raw.socket.close();
  },
);

t.test('updates caused by a durable timer and by a message from another instance', async (t) => {
  const alice = await clientFor('alice');
  await alice.machineInstances.create('rt', { slug: 'timed' });
  const updates: Update[] = [];
  const stop = alice.machineInstances.subscribe('rt', 'timed', (u) => updates.push(u as Update));
  await until('first state', () => updates.length === 1);
  await alice.machineInstances.sendEvent('rt', 'timed', { event: 'LATER' });
  await until('waiting', () => updates.length === 2);
  t.same(updates[1]?.state, 'waiting');
  await until('the timer fired', () => updates.length === 3, 10_000);
  t.same(updates[2]?.state, 'idle', "the durable timer's transition was pushed");
  stop();

  await operator.machineInstances.create('parent', { slug: 'p1' });
  const parentUpdates: Update[] = [];
  const operatorWs = new StateBackedClient(ADMIN, { apiHost: node.url, WebSocket: WebSocket as any });
  const stopParent = operatorWs.machineInstances.subscribe('parent', 'p1', (u) => parentUpdates.push(u as Update));
  await until('first parent state', () => parentUpdates.length === 1);
  await operator.machineInstances.sendEvent('parent', 'p1', { event: { type: 'START', childName: 'kid' } });
  await until("START and the child's PONG", () => parentUpdates.length === 3, 10_000);
  const transitions = (await operator.machineInstances.listTransitions('parent', 'p1')).transitions.map(eventType);
  t.same(transitions, ['xstate.init', 'START', 'PONG'], 'the third update is the PONG the child sent');
  stopParent();
});

t.test('getActor and getOrCreateActor subscribe and send', async (t) => {
  const alice = await clientFor('alice');
  const actor = await alice.machineInstances.getOrCreateActor('rt', 'actor-1', { context: {} });
  const seen: number[] = [];
  // (an ActorState: the public context is at context.public)
  const subscription = actor.subscribe((state: any) => seen.push(state.context.public.count));
  await until('first', () => seen.length >= 1);
  actor.send({ type: 'INC' });
  actor.send({ type: 'INC' });
  await until('two increments', () => seen.at(-1) === 2);
  subscription.unsubscribe();
  // (the client's Actor keeps its own subscription private)
  (actor as unknown as { unsubscribe?: () => void }).unsubscribe?.();
  const again = await alice.machineInstances.getActor('rt', 'actor-1');
  const last: number[] = [];
  const sub2 = again.subscribe((state: any) => last.push(state.context.public.count));
  await until('the current state', () => last.at(-1) === 2);
  sub2.unsubscribe();
  t.pass();
});

t.test("a deleted key ends its sockets' subscriptions with 403 (a new token is refused too); other keys' go on", async (t) => {
  const doomed = await operator.keys.create({ name: 'doomed', use: 'production' });
  const doomedToken = await signToken(
    { stateBackedKeyId: doomed.id, stateBackedSecretKey: doomed.key },
    { sub: 'owner' },
    { expires: { in: '1h' } },
  );
  const dave = new StateBackedClient(doomedToken, { apiHost: node.url, WebSocket: WebSocket as any });
  const owner = await clientFor('owner');
  await owner.machineInstances.create('rt', { slug: 'revoked-key', context: {} });
  const daveUpdates: Update[] = [];
  const daveErrors: any[] = [];
  const ownerUpdates: Update[] = [];
  const stopDave = dave.machineInstances.subscribe(
    'rt',
    'revoked-key',
    (u) => daveUpdates.push(u as Update),
    (e) => daveErrors.push(e),
  );
  const stopOwner = owner.machineInstances.subscribe('rt', 'revoked-key', (u) => ownerUpdates.push(u as Update));
  await until('both subscribed', () => daveUpdates.length === 1 && ownerUpdates.length === 1);
  await operator.keys.delete(doomed.id);
  await until("the deleted key's subscription ended", () => daveErrors.length === 1);
  t.type(daveErrors[0], errors.UnauthorizedError, '403 unauthorized, in band');
  await owner.machineInstances.sendEvent('rt', 'revoked-key', { event: 'INC' });
  await until("the other key's subscriber is updated", () => ownerUpdates.length === 2);
  await sleep(200);
  t.equal(daveUpdates.length, 1, 'nothing pushed once the key was deleted');
  stopDave();
  stopOwner();
});

t.test('a bad token gets an in-band error and no reconnect storm', async (t) => {
  const before = (await stats()).upgrades;
  const bad = new StateBackedClient('not-a-real-token', { apiHost: node.url, WebSocket: WebSocket as any, orgId: 'org_x' });
  const failures: any[] = [];
  const stop = bad.machineInstances.subscribe(
    'rt',
    'rapid',
    () => t.fail('no data for a bad token'),
    (e) => failures.push(e),
  );
  await until('the error', () => failures.length === 1);
  t.type(failures[0], errors.UnauthorizedError);
  await sleep(1_000);
  t.equal((await stats()).upgrades - before, 1, 'one upgrade: the socket stayed open');
  stop();
});

t.test('a credential given twice in the query is refused on every subscribe, as a repeated credential header is over HTTP', async (t) => {
  // Before: the first of each was taken, so a proxy in front that checked the last could be checking
  // another credential than the node.
  const token = await tokenFor('alice');
  for (const [label, more] of [
    ['token', `&token=${encodeURIComponent(token)}`],
    ['x-statebacked-org-id', '&x-statebacked-org-id=org_a&x-statebacked-org-id=org_b'],
  ] as const) {
    const raw = await rawSocket(token, more);
    raw.send({ type: 'subscribe-to-instance', requestId: 'r', machineName: 'rt', machineInstanceName: 'rapid' });
    await until(`${label}: the answer`, () => raw.frames.length === 1);
    t.match(raw.frames[0], { type: 'error', requestId: 'r', status: 400, code: 'invalid-parameter' }, label);
    t.match(raw.frames[0].message, new RegExp(`the query parameter ${label} is given more than once`));
    t.equal(raw.socket.readyState, WebSocket.OPEN, `${label}: the socket stays open (the real client reconnects at once when it closes)`);
    raw.socket.close();
  }
  const once = await rawSocket(token);
  once.send({ type: 'subscribe-to-instance', requestId: 'r', machineName: 'rt', machineInstanceName: 'rapid' });
  await until('the current state', () => once.frames.length === 1);
  t.match(once.frames[0], { type: 'instance-update' }, 'given once, the same token subscribes');
  once.socket.close();
});

t.test('raw frames: malformed, binary, oversized, unknown; 404; missing scope; limits; duplicates', async (t) => {
  const token = await tokenFor('alice');
  const raw = await rawSocket(token);
  raw.send('not json');
  raw.send({ type: 'dance', requestId: 'r0' });
  raw.socket.send(Buffer.from([1, 2, 3]));
  raw.send({ type: 'subscribe-to-instance', requestId: 'r-big', machineName: 'rt', machineInstanceName: 'x'.repeat(5000) });
  raw.send({ type: 'subscribe-to-instance', requestId: 'r1', machineName: 'rt', machineInstanceName: 'no-such-instance' });
  raw.send({ type: 'subscribe-to-instance', requestId: 'r2', machineName: 'rt' });
  raw.send({ type: 'ping' });
  await until('six answers', () => raw.frames.length === 6);
  // (a subscribe that passed the first checks waits for the node's copy: its answer may come after later ones)
  const order = (f: any) => `${f.requestId}|${f.status}`;
  t.match(
    [...raw.frames].sort((a, b) => order(a).localeCompare(order(b))),
    [
      { type: 'error', requestId: '', status: 400, code: 'invalid-parameter' },
      { type: 'error', requestId: '', status: 400 },
      { type: 'error', requestId: '', status: 413, code: 'payload-too-large' },
      { type: 'error', requestId: 'r0', status: 400, code: 'invalid-parameter' },
      { type: 'error', requestId: 'r1', status: 404, code: 'not-found' },
      { type: 'error', requestId: 'r2', status: 400, code: 'invalid-parameter' },
    ],
  );
  t.equal(raw.socket.readyState, WebSocket.OPEN, 'still open after all that');

  // Duplicate subscribes on one socket are allowed; the instance's updates come once per socket.
  await operator.machineInstances.create('private', { slug: 'p' });
  for (const id of ['d1', 'd2'])
    raw.send({ type: 'subscribe-to-instance', requestId: id, machineName: 'private', machineInstanceName: 'p' });
  await until('two current states', () => raw.frames.length === 8);
  t.match(raw.frames.slice(6), [
    { type: 'instance-update', machineName: 'private', machineInstanceName: 'p', state: 'a', publicContext: {}, tags: [], done: false },
    { type: 'instance-update', state: 'a' },
  ]);
  await operator.machineInstances.sendEvent('private', 'p', { event: 'GO' });
  await until('the update', () => raw.frames.length === 9);
  await sleep(100);
  t.equal(raw.frames.length, 9, 'one update for two subscriptions on one socket');
  t.match(raw.frames[8], { type: 'instance-update', state: 'b', done: true, publicContext: {} });
  raw.send({ type: 'subscribe-to-instance', requestId: 'd2', machineName: 'private', machineInstanceName: 'p' });
  await until('duplicate requestId refused', () => raw.frames.length === 10);
  t.match(raw.frames[9], { type: 'error', requestId: 'd2', status: 400 });

  // --rt-max-subscriptions 5: two held, three more fit, the sixth is refused.
  for (const id of ['l1', 'l2', 'l3', 'l4'])
    raw.send({ type: 'subscribe-to-instance', requestId: id, machineName: 'private', machineInstanceName: 'p' });
  await until('four answers', () => raw.frames.length === 14);
  t.match(
    raw.frames.slice(10).find((f) => f.requestId === 'l4'),
    { type: 'error', status: 429, code: 'rate-limited' },
  );
  t.equal(raw.frames.slice(10).filter((f) => f.type === 'instance-update').length, 3, 'the three that fit got the current state');
  raw.send({ type: 'unsubscribe-from-instance', requestId: 'l3', machineName: 'private', machineInstanceName: 'p' });
  raw.send({ type: 'subscribe-to-instance', requestId: 'l5', machineName: 'private', machineInstanceName: 'p' });
  await until('room again', () => raw.frames.length === 15);
  t.match(raw.frames.at(-1), { type: 'instance-update', state: 'b' });

  // Deleting the instance ends every subscription to it with a 404.
  await operator.machineInstances.dangerously.delete('private', 'p', { dangerDataWillBeDeletedForever: true });
  await until('five 404s', () => raw.frames.length === 20);
  t.ok(
    raw.frames.slice(15).every((f) => f.type === 'error' && f.status === 404),
    'each subscription is told',
  );
  raw.socket.close();

  // A key without state.read: 403 missing-scope, in-band.
  const ciKey = await operator.keys.create({ name: 'no-read', scopes: ['machines.read'] });
  const ciToken = await signToken({ stateBackedKeyId: ciKey.id, stateBackedSecretKey: ciKey.key }, { sub: 'x' }, { expires: { in: '1h' } });
  const noRead = await rawSocket(ciToken);
  noRead.send({ type: 'subscribe-to-instance', requestId: 's', machineName: 'rt', machineInstanceName: 'rapid' });
  await until('refused', () => noRead.frames.length === 1);
  t.match(noRead.frames[0], { type: 'error', requestId: 's', status: 403, code: 'missing-scope' });
  noRead.socket.close();
});

t.test('an authorizer that throws on a push refuses (and logs), as for reads: the subscription ends', async (t) => {
  const alice = await clientFor('alice');
  await alice.machineInstances.create('rt', { slug: 'boom' });
  const raw = await rawSocket(await tokenFor('alice'));
  raw.send({ type: 'subscribe-to-instance', requestId: 'b', machineName: 'rt', machineInstanceName: 'boom' });
  await until('current', () => raw.frames.length === 1);
  await alice.machineInstances.sendEvent('rt', 'boom', { event: 'EXPLODE' });
  await until('the error', () => raw.frames.length === 2);
  t.match(raw.frames[1], { type: 'error', requestId: 'b', status: 403, code: 'rejected-by-machine-authorizer' });
  raw.socket.close();
});

t.test('a subscriber that does not read gets an error and is closed, not buffered for without end', async (t) => {
  const alice = await clientFor('alice');
  await alice.machineInstances.create('rt', { slug: 'fat' });
  const raw = await rawSocket(await tokenFor('alice'));
  raw.send({ type: 'subscribe-to-instance', requestId: 'slow', machineName: 'rt', machineInstanceName: 'fat' });
  await until('current', () => raw.frames.length === 1);
  const closed = new Promise<number>((resolve) => raw.socket.once('close', (code) => resolve(code)));
  raw.socket.pause();
  // ≈ 300 KB per update: far more than the socket buffers and the node's 1 MiB bound together.
  for (let i = 0; i < 40; i++) await alice.machineInstances.sendEvent('rt', 'fat', { event: 'FAT' });
  await sleep(4_000);
  raw.socket.resume();
  const code = await Promise.race([closed, sleep(10_000).then(() => -1)]);
  t.equal(code, 1008, 'closed as a slow consumer');
  const last = raw.frames.at(-1);
  t.match(last, { type: 'error', requestId: 'slow', status: 503 }, 'told why before the close');
  t.ok(raw.frames.length < 41, `not every update was buffered for it (${raw.frames.length - 1} arrived)`);
  const after = await alice.machineInstances.sendEvent('rt', 'fat', { event: 'INC' });
  t.ok(after.ts > 0, 'the instance goes on');
});

t.test('a plain GET /rt without an upgrade is not a websocket', async (t) => {
  const plain = await call(node.url, 'GET', '/rt');
  t.not(plain.status, 101);
  t.ok(plain.status >= 400 && plain.status < 500, `answered ${plain.status}`);
  await until('sockets closed', () => true);
  t.ok((await stats()).sockets >= 0);
});
