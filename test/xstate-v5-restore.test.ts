/**
 * A v5 instance rebuilt from its stored snapshot before every event (a node with one live actor,
 * serving several instances round robin) gives exactly the answers, contexts and histories of one
 * that stays live: state values (parallel, deep history), tags, done, output-bearing final states,
 * pending delayed events and their cancellation, invoked promises, and which of two regions'
 * eventless transitions enabled together is taken.
 */
import t from 'tap';
import { StateBackedClient } from '@statebacked/client';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { INSTANCES, type RoundRobinCase, runRoundRobin } from './helpers/round-robin-instances.js';
import { HISTORY5, REGIONS5, SETTLE5, child5, importing5, invokingParent5, timers5 } from './fixtures/xstate-v5/machines.js';

const cases: RoundRobinCase[] = [
  {
    machine: 'hist5',
    code: importing5(HISTORY5),
    events: ['ON', 'NEXT', 'FLIP', 'BUMP', 'OFF', 'RESUME', 'BUMP', 'FINISH', 'BUMP', 'BUMP', 'OFF', 'RESUME', 'FINISH', 'ON'],
  },
  { machine: 'settle5', code: importing5(SETTLE5), events: ['GO', 'GO', 'FAIL', 'PING', 'GO'] },
  { machine: 'regions5', code: importing5(REGIONS5), events: ['START', 'GO', 'START', 'GO', 'START', 'GO'] },
  // delays of a minute: pending across every restore, never fired during the test
  { machine: 'timers5', code: importing5(timers5(60_000, 60_000)), events: ['ARM', 'DISARM', 'ARM', 'TICK', 'DISARM', 'TICK'] },
];

const live = await startNode();
const restoring = await startNode({ args: ['--max-live-actors', '1'] });
t.teardown(() => Promise.all([live.stop(), restoring.stop()]));

for (const c of cases) {
  t.test(`${c.machine}: the same answers and histories live and restored before each event`, async (t) => {
    const [a, r] = [await runRoundRobin(live, c), await runRoundRobin(restoring, c)];
    t.same(r.answers, a.answers, 'answers and contexts');
    t.same(r.histories, a.histories, 'histories');
    for (const name of INSTANCES) t.ok((a.histories[name] as unknown[]).length > 3, `${name} has a history`);
  });
}

t.test('the live answers are the machine’s (not merely equal on both nodes)', async (t) => {
  const token = live.adminKey as string;
  const get = async (m: string) =>
    (await call(live.url, 'GET', `/machines/${m}/i/i1/admin`, { token })).body as {
      state: unknown;
      context: Record<string, unknown>;
      done: boolean;
    };
  t.match(
    await get('hist5'),
    { state: 'finished', context: { n: 4 }, done: true },
    'FINISH ended it once n reached 3; the last ON was ignored',
  );
  const hist = (await call(live.url, 'GET', '/machines/hist5/i/i1/events', { token })).body as {
    transitions: { event: { type: string }; state: unknown }[];
  };
  const resumed = hist.transitions.filter((tr) => tr.event.type === 'RESUME').map((tr) => tr.state);
  t.same(
    resumed,
    [{ on: { two: { left: 'l2', right: 'r1' } } }, { on: { two: { left: 'l2', right: 'r2' } } }],
    'the deep history state brought back both regions',
  );
  t.match(await get('settle5'), { state: 'idle', context: { n: 8, failure: 'boom', pinged: true } });
  t.match(await get('regions5'), { state: 'idle', context: { picks: ['a', 'a', 'a'] } }, "region a's eventless transition, each time");
  const timers = (await call(live.url, 'GET', '/machines/timers5/i/i1/events', { token })).body as {
    transitions: { event: { type: string } }[];
  };
  t.same(
    timers.transitions.map((tr) => tr.event.type),
    ['xstate.init', 'ARM', 'DISARM', 'ARM', 'TICK', 'DISARM', 'TICK'],
  );
});

t.test(
  'persistentInvocableSource in a v5 invoke: the child is created from the input, and sendTo by invoke id reaches it after every restore',
  async (t) => {
    const client = new StateBackedClient(restoring.adminKey as string, { apiHost: restoring.url });
    for (const [name, code] of [
      ['inv5', invokingParent5],
      ['child5', child5],
    ] as const) {
      await client.machines.create(name);
      await client.machineVersions.create(name, { clientInfo: name, makeCurrent: true, code });
    }
    await client.machineInstances.create('inv5', { slug: 'p' });
    await client.machineInstances.create('inv5', { slug: 'q' }); // the one live actor: p is restored for each of its events
    const pongs = async (n: number) => {
      for (let i = 0; i < 100; i++) {
        const p = await client.machineInstances.admin.get('inv5', 'p');
        if (p.context.pongs === n) return p;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`never saw ${n} PONGs`);
    };
    for (let round = 1; round <= 2; round++) {
      await client.machineInstances.sendEvent('inv5', 'p', { event: 'PING_WORKER' });
      await client.machineInstances.sendEvent('inv5', 'q', { event: 'NOTHING' });
      t.equal((await pongs(round)).context.pongs, round, `round ${round}: the worker answered`);
    }
    t.same(
      (await client.machineInstances.admin.get('child5', 'worker-1')).context,
      { greeting: 'invoked with 0', pings: 2 },
      'created once, from the input; two PINGs',
    );
  },
);
