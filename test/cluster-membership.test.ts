import t from 'tap';
import { Membership } from '../src/cluster/membership.js';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

/** Membership over a real nats-server: joining, leaving, a node that stops beating, a restart. */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const options = (id: string) => ({ cluster: 'test', self: { id, url: `http://127.0.0.1/${id}` }, heartbeatMs: 100, missedHeartbeats: 4 });

t.test('nodes see each other, a leaver at once, a silent one after its missed beats', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const connections = await Promise.all(['a', 'b', 'c'].map((id) => connectTo(nats, id)));
  t.teardown(() => Promise.all(connections.map((nc) => nc.close())));
  const [a, b, c] = ['a', 'b', 'c'].map((id, i) => new Membership(connections[i] as never, options(`node-${id}`))) as [
    Membership,
    Membership,
    Membership,
  ];
  const changes: string[][] = [];
  a.onChange((members) => changes.push([...members]));
  await Promise.all([a.start(), b.start(), c.start()]);
  for (const m of [a, b, c]) t.same(m.current(), ['node-a', 'node-b', 'node-c'], 'every view has all three');
  t.same(a.member('node-b')?.url, 'http://127.0.0.1/node-b');

  await c.stop();
  await sleep(30);
  t.same(a.current(), ['node-a', 'node-b'], 'a node that leaves is dropped at once');

  // b stops beating without a word (its connection closes, as when its process is killed).
  const silencedAt = Date.now();
  await (connections[1] as { close(): Promise<void> }).close();
  while (a.current().includes('node-b') && Date.now() - silencedAt < 3_000) await sleep(20);
  const tookMs = Date.now() - silencedAt;
  t.same(a.current(), ['node-a'], `a silent node is dropped after its missed beats (${tookMs} ms)`);
  t.ok(tookMs >= 300 && tookMs < 1_000, 'between 3 and 10 beats');

  // c comes back under the same id: seen again, with its new start time.
  const again = new Membership(connections[2] as never, options('node-c'));
  await again.start();
  t.same(a.current(), ['node-a', 'node-c']);
  t.same(again.current(), ['node-a', 'node-c'], 'the newcomer learnt the cluster within its start');
  t.ok(changes.length >= 4, 'listeners were told each change');
  await again.stop();
  await a.stop();
});

t.test('different cluster names on one NATS do not mix', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const [one, two] = await Promise.all([connectTo(nats, 'one'), connectTo(nats, 'two')]);
  t.teardown(() => Promise.all([one.close(), two.close()]));
  const x = new Membership(one, { ...options('x'), cluster: 'blue' });
  const y = new Membership(two, { ...options('y'), cluster: 'green' });
  await Promise.all([x.start(), y.start()]);
  t.same(x.current(), ['x']);
  t.same(y.current(), ['y']);
  await Promise.all([x.stop(), y.stop()]);
});

t.test('a node that turns ready owns its share once the owning members count it, and waits a few beats at most', { skip }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const connections = await Promise.all(['a', 'b', 'c', 'old'].map((id) => connectTo(nats, id)));
  t.teardown(() => Promise.all(connections.map((nc) => nc.close())));
  const a = new Membership(connections[0] as never, options('node-a'));
  const b = new Membership(connections[1] as never, { ...options('node-b'), readyAtStart: false });
  await Promise.all([a.start(), b.start()]);
  t.same(b.current(), ['node-a'], 'a joining node owns nothing');
  // What node-a counted when node-b first counted itself: node-a must have let go of node-b's share by then
  // (else node-b fires timers of instances whose reads node-a still answers from its copy).
  let aCountedThen: string[] | undefined;
  b.onChange((members) => {
    if (members.includes('node-b')) aCountedThen ??= [...a.current()];
  });
  b.setReady();
  t.same(b.current(), ['node-a'], 'not at once: node-a has not heard that it is ready');
  for (const until = Date.now() + 2_000; !b.current().includes('node-b') && Date.now() < until;) await sleep(5);
  t.same(b.current(), ['node-a', 'node-b']);
  t.same(aCountedThen, ['node-a', 'node-b'], 'node-a counted node-b as an owner before node-b did');

  // A member that does not tell its view (an earlier release) is waited for, not forever: four beats, and
  // never less than a hand-over's bound and two beats (500 + 200 ms at these 100 ms beats).
  const old = connections[3] as { publish(subject: string, data: string): void };
  const oldBeat = () =>
    old.publish('statehold.test.members', JSON.stringify({ id: 'node-old', url: 'http://127.0.0.1/old', startedAt: 1 }));
  oldBeat();
  const beating = setInterval(oldBeat, 100);
  t.teardown(() => clearInterval(beating));
  await sleep(150);
  t.same(a.current(), ['node-a', 'node-b', 'node-old']);
  const c = new Membership(connections[2] as never, { ...options('node-c'), readyAtStart: false });
  await c.start();
  let ownedAt: number | undefined;
  c.onChange((members) => {
    if (members.includes('node-c')) ownedAt ??= Date.now();
  });
  const readyAt = Date.now();
  c.setReady();
  for (const until = Date.now() + 3_000; ownedAt === undefined && Date.now() < until;) await sleep(10);
  const waitedMs = (ownedAt ?? Infinity) - readyAt;
  t.ok(waitedMs >= 690 && waitedMs < 2_500, `owns its share once it waited 700 ms for node-old (${waitedMs} ms)`);
  await Promise.all([a.stop(), b.stop(), c.stop()]);
});

/** node-a, ready from the start, and node-b, joining, each on its own connection to one nats-server; not started (a test may set hooks first). */
const readyAndJoining = async (t: { teardown(fn: () => unknown): void }) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  const connections = await Promise.all(['a', 'b'].map((id) => connectTo(nats, id)));
  t.teardown(() => Promise.all(connections.map((nc) => nc.close())));
  return {
    a: new Membership(connections[0] as never, options('node-a')),
    b: new Membership(connections[1] as never, { ...options('node-b'), readyAtStart: false }),
  };
};

t.test('a member that gains an owner names it in its beats once what it handed over settled', { skip }, async (t) => {
  const { a, b } = await readyAndJoining(t);
  // (300 ms: well before node-b would stop waiting for node-a, 700 ms at these beats, so only the hand-over decides)
  let settling = 0;
  let settledAt: number | undefined;
  a.handOverWith(async () => {
    settling++;
    await sleep(300);
    settledAt = Date.now();
  });
  await Promise.all([a.start(), b.start()]);
  let aCountedBAt: number | undefined;
  a.onChange((members) => {
    if (members.includes('node-b')) aCountedBAt ??= Date.now();
  });
  let bOwnedAt: number | undefined;
  b.onChange((members) => {
    if (members.includes('node-b')) bOwnedAt ??= Date.now();
  });
  b.setReady();
  for (const until = Date.now() + 3_000; bOwnedAt === undefined && Date.now() < until;) await sleep(5);
  t.ok(aCountedBAt !== undefined, 'node-a counts node-b as an owner (it sends it their requests)');
  t.ok(
    settledAt !== undefined && bOwnedAt !== undefined && bOwnedAt >= settledAt,
    'node-b owns its share only after node-a settled what it handed over',
  );
  t.ok(bOwnedAt !== undefined && bOwnedAt - (aCountedBAt ?? 0) < 690, 'before it would have stopped waiting for node-a');
  t.equal(settling, 1, 'one hand-over');
  await Promise.all([a.stop(), b.stop()]);
});

t.test('a node that owns no share yet does not drain: the others never count it as an owner', { skip }, async (t) => {
  const { a, b } = await readyAndJoining(t);
  await Promise.all([a.start(), b.start()]);
  t.equal(b.drain(), false, 'joining: nothing to hand over');
  t.equal(b.self, 'joining');
  await sleep(250);
  t.same(a.current(), ['node-a'], 'node-a does not count it (a draining member would be an owner)');
  b.setReady();
  for (const until = Date.now() + 3_000; !b.current().includes('node-b') && Date.now() < until;) await sleep(5);
  t.equal(b.drain(), true, 'once it owns its share, it drains');
  for (const until = Date.now() + 3_000; !a.draining().includes('node-b') && Date.now() < until;) await sleep(5);
  t.same(a.draining(), ['node-b'], 'and node-a sees it draining');
  await Promise.all([a.stop(), b.stop()]);
});

t.test(
  "a member one node stops hearing while another hears it stays in that node's view; one that is gone leaves every view at once",
  { skip },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const connections = await Promise.all(['a', 'b', 'c'].map((id) => connectTo(nats, id)));
    t.teardown(() => Promise.all(connections.map((nc) => (nc.isClosed() ? Promise.resolve() : nc.close()))));
    // node-b's link loses node-c's beats from some point on (a route healed one way), and a look for
    // node-c from node-b finds no one (its interest lost with them); node-a still hears and finds it.
    let deaf = false;
    let cAlive = true;
    const real = connections[1] as NatsConnection;
    const deafToC = new Proxy(real, {
      get(target, key) {
        if (key !== 'subscribe') {
          const value = Reflect.get(target, key, target) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return (subject: string, opts: { callback: (error: unknown, message: Msg) => void }) =>
          target.subscribe(subject, {
            ...opts,
            callback: (error, message) => {
              if (deaf && subject.endsWith('.members') && message.json<{ id?: string }>().id === 'node-c') return;
              opts.callback(error, message);
            },
          });
      },
    });
    const a = new Membership(connections[0] as never, options('node-a'));
    const b = new Membership(deafToC as never, options('node-b'));
    const c = new Membership(connections[2] as never, options('node-c'));
    a.confirmDeparturesWith(async (id) => id === 'node-c' && !cAlive);
    b.confirmDeparturesWith(async (id) => id === 'node-c' && (deaf || !cAlive));
    c.confirmDeparturesWith(async () => false);
    await Promise.all([a.start(), b.start(), c.start()]);
    t.same(b.current(), ['node-a', 'node-b', 'node-c']);

    deaf = true;
    b.suspect('node-c', 'no-responders');
    await sleep(1_200);
    t.same(b.current(), ['node-a', 'node-b', 'node-c'], 'node-b keeps node-c: node-a says it hears it (3 drop windows later)');
    t.same(a.current(), ['node-a', 'node-b', 'node-c'], 'node-a, told, found node-c there');

    // node-c dies (no leaving word): node-b finds it gone on a request, as a forwarder does.
    cAlive = false;
    await (connections[2] as NatsConnection).close();
    const diedAt = Date.now();
    b.suspect('node-c', 'no-responders');
    while ((a.current().includes('node-c') || b.current().includes('node-c')) && Date.now() - diedAt < 3_000) await sleep(5);
    const tookMs = Date.now() - diedAt;
    t.same(
      [a.current(), b.current()],
      [
        ['node-a', 'node-b'],
        ['node-a', 'node-b'],
      ],
      `gone from both views in ${tookMs} ms`,
    );
    t.ok(tookMs < 300, 'before its missed beats would have dropped it (400 ms): no one vouches for it any longer');
    await Promise.all([a.stop(), b.stop(), c.stop()]);
  },
);
