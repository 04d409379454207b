import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { realtimeMachine } from './fixtures/realtime-machines.js';
import { call } from './helpers/http.js';
import { startFaultCluster } from './helpers/cluster-load.js';
import { eventually } from './helpers/eventually.js';
import { natsMissing } from './helpers/nats.js';
import { eventType } from './helpers/transitions.js';

/**
 * Faults in a 3-node cluster on a 3-server NATS (R3), under a steady stream of events: a node paused
 * past its heartbeat timeout and resumed, and a nats-server killed. Every acknowledged event must be in
 * its instance's history exactly once, in the order acknowledged.
 */

const skip = natsMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = 'cluster-faults-admin';

t.test(
  'a paused node does not write when it wakes; a lost nats-server and a killed owner lose nothing acknowledged, double nothing',
  { skip, timeout: 300_000 },
  async (t) => {
    const { nats, nodes } = await startFaultCluster(t, ADMIN);
    const clients = nodes.map((node) => new StateBackedClient(ADMIN, { apiHost: node.url }));
    await clients[0]?.machines.create('rt');
    await clients[1]?.machineVersions.create('rt', { clientInfo: 'v1', makeCurrent: true, code: realtimeMachine });
    const names = Array.from({ length: 9 }, (_, i) => `f${i}`);
    for (const name of names) await clients[2]?.machineInstances.create('rt', { slug: name });

    const orgs = (await call(nodes[0]?.url as string, 'GET', '/orgs', { token: ADMIN })).body.orgs;
    const orgId = orgs[0].id as string;
    const ownerOf = async (name: string) =>
      (await call(nodes[0]?.url as string, 'GET', `/cluster?instance=${orgId}/rt/${name}`, { token: ADMIN })).body.instance.owner as string;
    const onN3 = [];
    for (const name of names) if ((await ownerOf(name)) === 'n3') onN3.push(name);
    t.ok(onN3.length > 0, `n3 owns ${onN3.join(', ')}`);

    // A steady load through n1 and n2: each INC carries an id; the acknowledged ones are remembered.
    const acked = new Map<string, string[]>(names.map((name) => [name, []]));
    let sent = 0;
    const inc = async (client: StateBackedClient, name: string) => {
      const id = `e${sent++}`;
      await client.machineInstances.sendEvent('rt', name, { event: { type: 'INC', id } });
      acked.get(name)?.push(id);
    };
    let stop = false;
    let failures = 0;
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        const name = names[i % names.length] as string;
        try {
          await inc(clients[i % 2] as StateBackedClient, name);
        } catch {
          failures++;
          await sleep(20);
        }
      }
    })();
    // Each phase lasts until the load got through it (a condition, not a fixed time: a slow host waits
    // longer, a fast one does not wait for nothing): this many more events acknowledged, and for the
    // instances a killed node owned, some of theirs.
    const ackedIn = (of: string[] = names) => of.reduce((sum, name) => sum + (acked.get(name)?.length ?? 0), 0);
    const untilAcked = async (count: number, what: string, of: string[] = names, timeoutMs = 30_000) => {
      const before = ackedIn(of);
      const since = Date.now();
      await eventually(() => ackedIn(of) - before >= count, { timeoutMs, message: `${count} events acknowledged ${what}` });
      t.pass(`${count} events acknowledged ${what}, within ${Date.now() - since} ms`);
    };
    await untilAcked(30, 'before the pause');
    nodes[2]?.child.kill('SIGSTOP');
    await sleep(2_000);
    nodes[2]?.child.kill('SIGCONT');
    // n3 is back: requests through it too.
    t.equal(
      await eventually(async () => (await call(nodes[2]?.url as string, 'GET', '/health')).status === 200 && 200, {
        timeoutMs: 30_000,
        message: 'the paused node answers /health 200 again',
      }),
      200,
      'the paused node rejoined',
    );
    await untilAcked(30, 'after the paused node woke');
    for (const name of onN3) {
      for (let attempt = 0; ; attempt++) {
        try {
          await inc(clients[2] as StateBackedClient, name);
          break;
        } catch (error) {
          if (attempt > 50) throw error;
          await sleep(100);
        }
      }
    }
    await nats.kill(0);
    // (a fixed time here, not a condition: the owner is killed while the cluster is still getting over
    // the lost server, its streams electing new leaders, as it was before; waiting for the load to get
    // through first (some 12 s on a loaded host) would test the two faults one after the other instead)
    await sleep(3_000);
    // The owner of a third of the instances dies mid-load: requests it had taken are asked again of
    // the new owners with their request ids, and applied once.
    await nodes[2]?.stop('SIGKILL');
    // (up to a minute: with a nats-server lost just before, consumers may deliver nothing for seconds
    // and a request or its answer may die with the server; 0.5–6.8 s in 7 runs here since both are
    // handled, up to 23 s before, once over 30 s in a clean-clone CI run: cluster/README.md, What is left, 14)
    await untilAcked(2 * onN3.length, 'on the instances the killed node owned, after it died', onN3, 60_000);
    await untilAcked(50, 'after the owner was killed');
    stop = true;
    await load;
    // Reads are answered by each instance's owner, which catches a partition it took over up with the
    // log before it answers for it: nothing to wait for here.
    let total = 0;
    for (const name of names) {
      const ids = acked.get(name) as string[];
      total += ids.length;
      const historyOf = async () => {
        const history: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await (clients[1] as StateBackedClient).machineInstances.listTransitions(
            'rt',
            name,
            cursor ? { cursor } : undefined,
          );
          history.push(
            ...page.transitions.filter((tr) => eventType(tr) === 'INC').map((tr) => (tr.event as { type: string; id: string }).id),
          );
          cursor = page.cursor;
        } while (cursor);
        return history;
      };
      // A read waits at most 2 s for the node's copy; on a loaded host a follower that was on the dead
      // nats-server may take longer to resume. Acknowledged events must all be there in the end: read
      // again for a while (a lost one never appears, and fails below).
      // (an owner whose partition's follower has not resumed yet answers 503 "retry": a client retries)
      const historyRetried = async (): Promise<string[]> => {
        for (let attempt = 0; ; attempt++) {
          try {
            return await historyOf();
          } catch (error) {
            if ((error as { status?: number }).status !== 503 || attempt >= 30) throw error;
            await sleep(500);
          }
        }
      };
      let history = await historyRetried();
      for (let i = 0; i < 30 && !ids.every((id) => history.includes(id)); i++) {
        await sleep(500);
        history = await historyRetried();
      }
      // A request that failed may still have been applied: the history holds every acknowledged one, once, in order.
      t.same(
        history.filter((id) => ids.includes(id)),
        ids,
        `${name}: every acknowledged event is in the history once, in the order acknowledged`,
      );
      t.equal(new Set(history).size, history.length, `${name}: no event twice`);
    }
    t.ok(total > 50, `${total} events acknowledged, ${failures} requests failed (and were retried) during the faults`);
  },
);
