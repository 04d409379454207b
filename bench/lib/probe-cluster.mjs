// What the cluster probes (bench/probes/failover-timeline.mjs, watermark.mjs) share: a cluster of their
// own under `dir` (cluster/launch.mjs), the probe machine set up with a token, and a load of events.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setupMachine } from './setup-machine.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Launches `nodes` nodes under `dir` (afresh), sets up the machine `probe`, runs `probe` with the
 * cluster's state (`state`: cluster.json), `adminKey`, the nodes' `urls` and `post(url, path, body)`
 * (the token's request; resolves to the answer's status, at most 15 s), then takes the cluster down.
 */
export const withProbeCluster = async ({ dir, nodes }, probe) => {
  const env = { ...process.env, CLUSTER_DIR: dir, NODES: String(nodes) };
  const launch = (what) => execFileSync(process.execPath, [join(repoRoot, 'cluster/launch.mjs'), what], { env, stdio: 'inherit' });
  execFileSync('rm', ['-rf', dir]);
  launch('up');
  try {
    const state = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8'));
    const { adminKey } = JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8'));
    const urls = state.nodes.map((node) => node.url);
    const { token } = await setupMachine({ url: urls[0], adminKey, machine: 'probe' });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const post = async (url, path, body) =>
      (await fetch(`${url}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(15_000) })).status;
    return await probe({ state, adminKey, urls, post });
  } finally {
    launch('down');
  }
};

/** Creates `instances` instances of `probe` (`i0`…), round-robin over `urls`; `checked(status, path)` sees each answer. */
export const createInstances = async ({ urls, post, instances, checked = () => undefined }) => {
  const path = '/machines/probe';
  for (let i = 0; i < instances; i++) checked(await post(urls[i % urls.length], path, { slug: `i${i}` }), path);
};

/** Sends `events` ADD events over those instances at `concurrency` in flight, round-robin over `urls`. */
export const sendEvents = async ({ urls, post, instances, events, concurrency, checked = () => undefined }) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let n = next++; n < events; n = next++) {
        const path = `/machines/probe/i/i${n % instances}/events`;
        checked(await post(urls[n % urls.length], path, { event: { type: 'ADD', item: 'x' } }), path);
      }
    }),
  );
};
