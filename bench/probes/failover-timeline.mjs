// Probe: where a failover's time goes. Three nodes (cluster/launch.mjs under PROBE_DIR), instances made and
// written, a steady load through two of them, then node-3 is SIGKILLed and each instance it owned is asked
// every 20 ms through the survivors until answered 200. Prints each instance's time from the kill, and the
// survivors' log lines after the kill (their timestamps, when the nodes print them).
//   node bench/probes/failover-timeline.mjs
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInstances, sendEvents, withProbeCluster } from '../lib/probe-cluster.mjs';

const dir = process.env.PROBE_DIR ?? '/tmp/probe-failover';
const instances = Number(process.env.PROBE_INSTANCES ?? 300);
const warmEvents = Number(process.env.PROBE_EVENTS ?? 3000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

await withProbeCluster({ dir, nodes: 3 }, async ({ state, adminKey, urls, post }) => {
  await createInstances({ urls, post, instances });
  await sendEvents({ urls, post, instances, events: warmEvents, concurrency: 32 });
  const org = (await (await fetch(`${urls[0]}/orgs`, { headers: { authorization: `Bearer ${adminKey}` } })).json()).orgs[0].id;
  const owned = [];
  for (let i = 0; i < instances; i++) {
    const view = await (
      await fetch(`${urls[0]}/cluster?instance=${org}/probe/i${i}`, { headers: { authorization: `Bearer ${adminKey}` } })
    ).json();
    if ((view.instance?.owner ?? view.owner) === 'node-3') owned.push(i);
  }
  console.log(`node-3 owns ${owned.length} of ${instances}`);
  const victim = state.nodes[2];
  const survivors = urls.slice(0, 2);
  let stop = false;
  let steadyMax = 0;
  const steady = (async () => {
    for (let n = 0; !stop; n++) {
      const i = n % instances;
      if (owned.includes(i)) continue;
      const t = performance.now();
      await post(survivors[n % 2], `/machines/probe/i/i${i}/events`, { event: { type: 'ADD', item: 'x' } });
      steadyMax = Math.max(steadyMax, performance.now() - t);
      await sleep(5);
    }
  })();
  await sleep(1500);
  const killedAt = performance.now();
  const wall = Date.now();
  process.kill(victim.pid, 'SIGKILL');
  console.log(`killed node-3 at ${new Date(wall).toISOString()}`);
  const times = await Promise.all(
    owned.map(async (i, k) => {
      for (let attempt = 0; ; attempt++) {
        const status = await post(survivors[(k + attempt) % 2], `/machines/probe/i/i${i}/events`, {
          event: { type: 'ADD', item: 'x' },
        }).catch(() => 0);
        if (status === 200) return performance.now() - killedAt;
        if (performance.now() - killedAt > 20_000) return Infinity;
        await sleep(20);
      }
    }),
  );
  stop = true;
  await steady;
  times.sort((a, b) => a - b);
  const at = (q) => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]);
  console.log(
    `failover ms: min ${Math.round(times[0])} p50 ${at(0.5)} p99 ${at(0.99)} max ${Math.round(times.at(-1))}; steady max ${Math.round(steadyMax)} ms`,
  );
  for (const id of ['node-1', 'node-2']) {
    const lines = readFileSync(join(dir, `${id}.log`), 'utf8')
      .split('\n')
      .filter((line) => /^\d{4}-\d\d-\d\dT/.test(line) && line >= new Date(wall - 100).toISOString());
    console.log(`--- ${id}\n${lines.slice(0, 40).join('\n')}`);
  }
});
