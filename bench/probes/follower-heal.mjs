// Probe: how long do a JetStream cluster's writes and API stop when a follower's routes heal, or when
// the stream's leader is killed, without Statehold? Three nats-servers (R3 stream TX, allow_direct),
// every route of server 3 through TCP proxies; server 1 made the stream's leader; one writer per server
// appends in turn to its own subject with an expected last subject sequence (as the TX log appends), and
// one asker per server asks the JetStream API for the last message of a subject (STREAM.MSG.GET, as the
// read barrier and fences do), each every 5 ms.
//   heal: server 3's routes are cut (blackhole) for CUT_MS, then healed; 20 s later every writer stops.
//         Prints the longest stretch without a success after the heal, per writer and asker.
//   kill: server 1 (the stream's leader) is SIGKILLed; 20 s later every writer stops. Prints, for the
//         other servers' writers and askers, when each first succeeded after the kill, and when an
//         ordered consumer (as a node's partition follower makes) was first made and delivered.
// Both print who led the stream and the meta group before and after.
//   node bench/probes/follower-heal.mjs [rounds, 3] [cut ms, 10000] [heal|kill, heal]
// Needs Debian's nats-server and `make test-build` (it uses the tests' TCP proxy).
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startWithCutOffServer } from './cut-off-server.mjs';

const rounds = Number(process.argv[2] ?? 3);
const cutMs = Number(process.argv[3] ?? 10_000);
const fault = process.argv[4] ?? 'heal';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** When `times` (sorted) first has an entry after `from`, in ms after it. */
const firstAfter = (times, from) => {
  const time = times.find((t) => t > from);
  return time === undefined ? null : time - from;
};

/** The longest stretch in [from, to] without an entry of `times` (sorted), in ms. */
const longestGap = (times, from, to) => {
  let gap = 0;
  let previous = from;
  for (const time of times) {
    if (time < from) continue;
    if (time > to) break;
    gap = Math.max(gap, time - previous);
    previous = time;
  }
  return Math.max(gap, to - previous);
};

const round = async () => {
  const cluster = await startWithCutOffServer(2);
  const { nats, ncs } = cluster;
  try {
    const jsm = await jetstreamManager(ncs[0]);
    await jsm.streams.add({ name: 'TX', subjects: ['t.>'], num_replicas: 3, allow_direct: true });
    const info = async () => (await jsm.streams.info('TX').catch(() => undefined))?.cluster?.leader ?? '?';
    /** The meta group's leader as server 1's monitoring port tells it. */
    const metaLeader = async () => {
      const jsz = await (await fetch(`http://127.0.0.1:${nats.servers[0].httpPort}/jsz`)).json().catch(() => undefined);
      return jsz?.meta_cluster?.leader ?? '?';
    };
    for (let i = 0; i < 30 && (await info()) !== 'nats-1'; i++) {
      await ncs[0].request('$JS.API.STREAM.LEADER.STEPDOWN.TX', undefined, { timeout: 5_000 }).catch(() => undefined);
      await sleep(1_500);
    }
    let stop = false;
    const writes = [[], [], []];
    const asks = [[], [], []];
    const writer = async (i) => {
      const js = jetstream(ncs[i], { timeout: 2_000 });
      const local = await jetstreamManager(ncs[i]);
      let last = 0;
      for (let n = 0; !stop; n++) {
        try {
          last = (await js.publish(`t.w${i}`, `w${i}-${n}`, { expect: { lastSubjectSequence: last } })).seq;
          writes[i].push(Date.now());
        } catch (error) {
          if (error?.code === 10071) {
            const message = await local.streams.getMessage('TX', { last_by_subj: `t.w${i}` }).catch(() => null);
            if (message) last = message.seq;
          }
          await sleep(50);
        }
        await sleep(5);
      }
    };
    const asker = async (i) => {
      const local = await jetstreamManager(ncs[i], { timeout: 2_000 });
      while (!stop) {
        const message = await local.streams.getMessage('TX', { last_by_subj: `t.w${(i + 1) % 3}` }).catch(() => null);
        if (message) asks[i].push(Date.now());
        else await sleep(50);
        await sleep(5);
      }
    };
    const work = [0, 1, 2].flatMap((i) => [writer(i), asker(i)]);
    await sleep(3_000);
    const before = { stream: await info(), meta: await metaLeader() };
    if (fault === 'kill') {
      const killedAt = Date.now();
      await nats.kill(0);
      // (what a node's partition follower does after losing its server: an ordered consumer from a recent position)
      let consumerAt = null;
      const js2 = jetstream(ncs[1], { timeout: 2_000 });
      while (consumerAt === null && Date.now() - killedAt < 20_000) {
        try {
          const consumer = await js2.consumers.get('TX', { deliver_policy: 'all', filter_subjects: 't.w2' });
          if (await consumer.next({ expires: 2_000 })) consumerAt = Date.now() - killedAt;
          await consumer.delete().catch(() => undefined);
        } catch {
          await sleep(50);
        }
      }
      await sleep(Math.max(0, 20_000 - (Date.now() - killedAt)));
      stop = true;
      await Promise.all(work);
      const jsm2 = await jetstreamManager(ncs[1]);
      const after = { stream: (await jsm2.streams.info('TX').catch(() => undefined))?.cluster?.leader ?? '?' };
      return {
        fault,
        before,
        after,
        firstWriteAfterKillMs: [1, 2].map((i) => firstAfter(writes[i], killedAt)),
        firstAnswerAfterKillMs: [1, 2].map((i) => firstAfter(asks[i], killedAt)),
        firstConsumerDeliveryAfterKillMs: consumerAt,
      };
    }
    cluster.cut('blackhole');
    await sleep(cutMs);
    const healedAt = Date.now();
    cluster.heal();
    await sleep(20_000);
    const end = Date.now();
    stop = true;
    await Promise.all(work);
    const after = { stream: await info(), meta: await metaLeader() };
    return {
      fault,
      before,
      after,
      writeGapsAfterHealMs: writes.map((times) => longestGap(times, healedAt, end)),
      askGapsAfterHealMs: asks.map((times) => longestGap(times, healedAt, end)),
      writes: writes.map((times) => times.length),
    };
  } finally {
    await cluster.stop();
  }
};

for (let i = 0; i < rounds; i++) console.log(JSON.stringify(await round()));
