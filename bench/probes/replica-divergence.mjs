// Probe: do a JetStream stream's three replicas hold the same messages after its leader's routes are cut
// under load? Three nats-servers (R3 stream, allow_direct), every route of server 1 through TCP proxies;
// server 1 made the stream's leader; one writer per server appends in turn to its own subject with an
// expected last subject sequence, retrying (after a 2 s timeout) a publish that got no answer. Server 1's
// routes are cut (blackhole: nothing through, nothing closed) for 12 s, then healed; after 8 s more the
// writers stop and each server's replica is read whole (direct gets through a connection to that server
// alone, which its own replica answers). Alternates the two ways an append can carry its id:
//   msg-id    JetStream's Nats-Msg-Id (the server's duplicate detection), as TX appends did before 2026-11-30
//   entry-id  a header of our own (Statehold-Entry-Id), as they do now
// and prints, per round, the sequences at which the replicas differ and the acknowledged messages missing
// from some replica. Needs Debian's nats-server and `make test-build` (it uses the tests' TCP proxy).
//   node bench/probes/replica-divergence.mjs [rounds per way, 3] [repair | wait]
// With `repair`, server 1's peer is then removed from the stream (the remedy for a replica that diverged)
// and the replicas compared again once it is back; with `wait`, the same wait without the removal.
import { headers as natsHeaders } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startWithCutOffServer } from './cut-off-server.mjs';

const rounds = Number(process.argv[2] ?? 3);
/** With `repair`, the cut server's peer is removed from the stream after the comparison, and the replicas compared again. */
const repair = process.argv[3] === 'repair' || process.argv[3] === 'wait';
/** With `wait`, nothing is removed: the replicas are compared again after the same wait (the control). */
const removePeer = process.argv[3] === 'repair';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const round = async (way) => {
  const cluster = await startWithCutOffServer(0);
  const { nats, ncs } = cluster;
  try {
    const jsm = await jetstreamManager(ncs[1]);
    await jsm.streams.add({ name: 'TX', subjects: ['t.>'], num_replicas: 3, allow_direct: true, duplicate_window: 120e9 });
    const leader = async () => (await jsm.streams.info('TX').catch(() => undefined))?.cluster?.leader;
    for (let i = 0; i < 30 && (await leader()) !== 'nats-1'; i++) {
      await ncs[1].request('$JS.API.STREAM.LEADER.STEPDOWN.TX', undefined, { timeout: 5_000 }).catch(() => undefined);
      await sleep(1_500);
    }
    let stop = false;
    const acked = new Set();
    const writer = async (i) => {
      const js = jetstream(ncs[i], { timeout: 2_000 });
      let last = 0;
      for (let n = 0; !stop; n++) {
        const id = `w${i}-${n}`;
        for (;;) {
          if (stop) return;
          const options = { expect: { lastSubjectSequence: last } };
          if (way === 'msg-id') options.msgID = id;
          else {
            options.headers = natsHeaders();
            options.headers.set('Statehold-Entry-Id', id);
          }
          try {
            last = (await js.publish(`t.w${i}`, id, options)).seq;
            acked.add(id);
            break;
          } catch (error) {
            if (error?.code === 10071) {
              // (moved past the position: by this message's own first copy, or give the position up)
              // (asked of the leader: a direct get would be answered by the writer's own replica)
              const message = await jsm.streams.getMessage('TX', { last_by_subj: `t.w${i}` }).catch(() => null);
              if (message) {
                last = message.seq;
                if (message.string() === id) acked.add(id);
                break;
              }
            }
            await sleep(100);
          }
        }
        await sleep(5);
      }
    };
    const writers = [0, 1, 2].map(writer);
    await sleep(3_000);
    const ledBy = await leader();
    cluster.cut('blackhole');
    await sleep(12_000);
    cluster.heal();
    await sleep(8_000);
    stop = true;
    await Promise.all(writers);
    await sleep(2_000);
    const compared = async () => {
      const copies = [];
      for (const nc of ncs) {
        const local = await jetstreamManager(nc);
        const last = (await local.streams.info('TX')).state.last_seq;
        const rows = [];
        for (let seq = 1; seq <= last; seq++) rows.push((await local.direct.getMessage('TX', { seq }).catch(() => null))?.string() ?? '-');
        copies.push(rows);
      }
      const length = Math.max(...copies.map((rows) => rows.length));
      let differing = 0;
      for (let i = 0; i < length; i++) if (new Set(copies.map((rows) => rows[i])).size > 1) differing++;
      const held = copies.map((rows) => new Set(rows));
      return { differing, missing: [...acked].filter((id) => held.some((set) => !set.has(id))).length };
    };
    const { differing, missing } = await compared();
    if (!repair) return { way, ledBy, acked: acked.size, differing, missing };
    // The operator's remedy for a replica that diverged: remove that server's peer from the stream, so
    // that JetStream places the replica anew and fills it from the leader.
    const answer = removePeer
      ? (await ncs[1].request('$JS.API.STREAM.PEER.REMOVE.TX', JSON.stringify({ peer: 'nats-1' }), { timeout: 5_000 })).json()
      : { success: 'not asked' };
    let current = false;
    for (let i = 0; i < 60 && !current; i++) {
      await sleep(1_000);
      const cluster = (await jsm.streams.info('TX').catch(() => undefined))?.cluster;
      current = (cluster?.replicas ?? []).length === 2 && cluster.replicas.every((replica) => replica.current);
    }
    await sleep(2_000);
    const after = await compared();
    return { way, ledBy, acked: acked.size, differing, missing, peerRemoved: answer.success ?? answer.error, afterRepair: after };
  } finally {
    await cluster.stop();
  }
};

const results = [];
for (let i = 0; i < rounds; i++)
  for (const way of ['msg-id', 'entry-id']) {
    const result = await round(way);
    results.push(result);
    console.log(JSON.stringify(result));
  }
for (const way of ['msg-id', 'entry-id']) {
  const mine = results.filter((result) => result.way === way);
  const median = (key) => mine.map((result) => result[key]).sort((a, b) => a - b)[Math.floor(mine.length / 2)];
  console.log(
    `${way}: ${mine.length} rounds; sequences differing, median ${median('differing')} (${mine.map((r) => r.differing).join(', ')}); acknowledged missing from a replica, median ${median('missing')} (${mine.map((r) => r.missing).join(', ')}) of ~${median('acked')}`,
  );
}
