// What one commit costs JetStream when commits are appended one per message (as the cluster's TX log
// does: an instance's entry on its own subject, with the expected last subject sequence) against
// several commits grouped into one message: the nats-servers' CPU and the client's, per commit, on
// three nats-servers with an R3 stream (cluster/nats-servers.mjs), nothing else running. It says what
// appends grouped across instances would save, which the per-instance fencing of the TX log rules out
// as built (bench/JOURNAL.md, 2026-11-29 13:15).
//
//   node bench/probes/jetstream-appends.mjs [GROUPS] [ROUNDS]
//
// GROUPS: commits per message, comma-separated (default 1,4,16). Per round and group size:
// JS_APPENDS_COMMITS commits (default 20,000) of JS_APPENDS_BYTES bytes each (default 600, about an
// entry of the bench's cart), JS_APPENDS_C messages in flight (default 16), after a warm-up of a tenth.
// With group size 1 each message goes to one of 1,024 instance subjects with the expected last subject
// sequence header, as the TX log's appends do; grouped messages go to one subject per partition (64)
// without it. Prints the medians over rounds; writes bench/results/jetstream-appends-<time>.json.
import { connect, headers as natsHeaders } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { readFileSync } from 'node:fs';
import { startNatsServers } from '../../cluster/nats-servers.mjs';
import { writeProbeReport } from '../lib/probe-report.mjs';

const GROUPS = (process.argv[2] ?? '1,4,16').split(',').map(Number);
const ROUNDS = Number(process.argv[3] ?? 3);
const COMMITS = Number(process.env.JS_APPENDS_COMMITS ?? 20_000);
const BYTES = Number(process.env.JS_APPENDS_BYTES ?? 600);
const C = Number(process.env.JS_APPENDS_C ?? 16);
/** A multiple of any C up to 1,024 that divides it: worker w keeps to the instances ≡ w (mod C). */
const INSTANCES = 1_024;
const PARTITIONS = 64;

const cpuSeconds = (pid) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

const servers = await startNatsServers({ count: 3 });
const pids = servers.servers.map((server) => server.process.pid);
const nc = await connect({ servers: servers.servers.map((server) => server.url), noAsyncTraces: true });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);
const payloadOf = (group) => new Uint8Array(Buffer.alloc(group * BYTES + (group - 1), 'x'));

/** `commits` commits in messages of `group`, C in flight (`lastSeq`: each subject's last sequence); returns CPU µs per commit (servers, client) and commits/s. */
const run = async (stream, group, commits, lastSeq) => {
  const payload = payloadOf(group);
  const messages = Math.ceil(commits / group);
  let next = 0;
  const serversBefore = pids.map(cpuSeconds);
  const clientBefore = process.cpuUsage();
  const started = performance.now();
  const worker = async (w) => {
    for (let k = 0; ; k++) {
      const n = next++;
      if (n >= messages) return;
      if (group === 1) {
        // Each worker owns its instances, so that no subject has two appends in flight.
        const instance = (w + C * k) % INSTANCES;
        const subject = `${stream}.${instance % PARTITIONS}.i${instance}`;
        const h = natsHeaders();
        h.set('Nats-Expected-Last-Subject-Sequence', String(lastSeq.get(subject) ?? 0));
        const ack = await js.publish(subject, payload, { headers: h });
        lastSeq.set(subject, ack.seq);
      } else {
        await js.publish(`${stream}.${n % PARTITIONS}.group`, payload);
      }
    }
  };
  await Promise.all(Array.from({ length: C }, (_, w) => worker(w)));
  const seconds = (performance.now() - started) / 1000;
  const client = process.cpuUsage(clientBefore);
  const serversUs = pids.map((pid, i) => (cpuSeconds(pid) - serversBefore[i]) * 1e6);
  const done = messages * group;
  return {
    commitsPerS: Math.round(done / seconds),
    serversUsPerCommit: Math.round(serversUs.reduce((a, b) => a + b, 0) / done),
    busiestServerUsPerCommit: Math.round(Math.max(...serversUs) / done),
    clientUsPerCommit: Math.round((client.user + client.system) / done),
  };
};

const results = Object.fromEntries(GROUPS.map((group) => [group, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const group of round % 2 === 0 ? GROUPS : [...GROUPS].reverse()) {
      const stream = `probe${round}g${group}`;
      await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], num_replicas: 3, allow_direct: true, duplicate_window: 120e9 });
      const lastSeq = new Map(); // subject -> its last sequence (for the expected-sequence header)
      await run(stream, group, Math.ceil(COMMITS / 10), lastSeq);
      const figures = await run(stream, group, COMMITS, lastSeq);
      await jsm.streams.delete(stream);
      results[group].push(figures);
      console.log(`round ${round + 1}, ${group} per message: ${JSON.stringify(figures)}`);
    }
  }
} finally {
  await nc.close();
  await servers.stop();
}
const medians = Object.fromEntries(
  Object.entries(results).map(([group, list]) => [
    group,
    Object.fromEntries(Object.keys(list[0]).map((figure) => [figure, median(list.map((r) => r[figure]))])),
  ]),
);
console.log(JSON.stringify(medians, null, 2));
console.log(
  `wrote ${writeProbeReport('jetstream-appends', { groups: GROUPS, rounds: ROUNDS, commits: COMMITS, bytes: BYTES, c: C, results, medians })}`,
);
