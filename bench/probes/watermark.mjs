// Probe: after a burst of events on a cluster, does every held partition's applied watermark reach the
// partition's last entry once nothing is written? Starts its own nats-server(s) and node(s) with
// cluster/launch.mjs under PROBE_DIR, drives PROBE_EVENTS events at PROBE_C in flight over
// PROBE_INSTANCES instances, then compares GET /cluster's partitions.held[].appliedSeq with the log's
// last entry of each partition (the node's own /cluster?last=1 view is not used: the log is asked here).
//   node bench/probes/watermark.mjs     (NODES=1 by default; PROBE_WATCH_S how long to watch after)
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createInstances, sendEvents, withProbeCluster } from '../lib/probe-cluster.mjs';

const dir = process.env.PROBE_DIR ?? '/tmp/probe-watermark';
const instances = Number(process.env.PROBE_INSTANCES ?? 200);
const events = Number(process.env.PROBE_EVENTS ?? 3000);
const concurrency = Number(process.env.PROBE_C ?? 64);
const watchS = Number(process.env.PROBE_WATCH_S ?? 8);

await withProbeCluster({ dir, nodes: process.env.NODES ?? 1 }, async ({ state, adminKey, urls, post }) => {
  const checked = (status, path) => {
    if (status !== 200) throw new Error(`${path}: ${status}`);
  };
  await createInstances({ urls, post, instances, checked });
  const t0 = Date.now();
  await sendEvents({ urls, post, instances, events, concurrency, checked });
  console.log(`${events} events in ${Date.now() - t0} ms`);
  const nc = await connect({ servers: state.nats });
  const jsm = await jetstreamManager(nc);
  const streams = [];
  for await (const s of jsm.streams.list()) streams.push(s.config.name);
  const tx = streams.find((name) => name.endsWith('_TX'));
  const prefix = (await jsm.streams.info(tx)).config.subjects[0].replace(/>$/, '');
  const lastOf = async (partition) => {
    try {
      return (await jsm.streams.getMessage(tx, { last_by_subj: `${prefix}${partition}.>` })).seq;
    } catch {
      return 0;
    }
  };
  for (let s = 0; s <= watchS; s += 2) {
    let behind = 0;
    let entries = 0;
    const examples = [];
    for (const url of urls) {
      const view = await (await fetch(`${url}/cluster`, { headers: { authorization: `Bearer ${adminKey}` } })).json();
      for (const held of view.partitions.held) {
        const last = await lastOf(held.partition);
        if (held.appliedSeq < last) {
          behind++;
          entries += last - held.appliedSeq;
          if (examples.length < 4) examples.push(`p${held.partition} ${held.appliedSeq}/${last}`);
        }
      }
    }
    console.log(`t+${s}s: ${behind} partitions behind by ${entries} entries ${examples.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  await nc.close();
});
