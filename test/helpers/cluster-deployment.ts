import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { eventually } from './eventually.js';
import { CLUSTER_NODE_START_MS, type NodeProcess, removeDir, type StartOptions, startNodeProcess, tempDataDir } from './node-process.js';
import { startRoundRobinProxy } from './round-robin-proxy.js';
import { startNatsServers } from '../../cluster/nats-servers.mjs';

const NODE_IDS = ['n1', 'n2', 'n3'];
const MASTER_KEY = Buffer.alloc(32, 11).toString('base64');

const flagValue = (args: string[], flag: string): string | undefined => {
  const at = args.indexOf(flag);
  return at >= 0 ? args[at + 1] : undefined;
};

/**
 * What `startNode` gives the drop-in suites when STATEHOLD_TEST_DEPLOYMENT=cluster: three nats-servers
 * (a JetStream cluster, R3) and three `statehold node` processes with the test's flags, behind one
 * URL whose every request goes to the next node. Everything lives under one dir (the test's
 * `dataDir` when given), so stopping it and starting it again on that dir restarts the same cluster
 * with its data, as a restart of `statehold serve` on its data dir does.
 */
export const startClusterDeployment = async (options: StartOptions): Promise<NodeProcess> => {
  const root = options.dataDir ?? tempDataDir();
  const args = options.args ?? [];
  const adminKey = flagValue(args, '--admin-key') ?? storedAdminKey(root, options.generatedAdminKey === true);
  const nats = await startNatsServers({ count: 3, dir: join(root, 'nats'), keep: true });
  const nodes: NodeProcess[] = [];
  // The proxy is the deployment's public address (what a load balancer is to a real cluster): upload
  // URLs and links the nodes hand out name it, as --public-url tells them.
  const proxy = await startRoundRobinProxy(() => nodes.map((node) => node.port));
  try {
    nodes.push(
      ...(await Promise.all(
        NODE_IDS.map((id) =>
          startNodeProcess({
            command: 'node',
            dataDir: join(root, id),
            generatedAdminKey: true,
            startTimeoutMs: Math.max(options.startTimeoutMs ?? 0, CLUSTER_NODE_START_MS),
            nodeArgs: options.nodeArgs,
            env: { STATEHOLD_MASTER_KEY: MASTER_KEY, ...options.env },
            args: [
              ...(args.includes('--admin-key') ? [] : ['--admin-key', adminKey]),
              '--public-url',
              proxy.url,
              '--nats',
              nats.urls.join(','),
              '--node-id',
              id,
              '--replicas',
              '3',
              ...args,
            ],
          }),
        ),
      )),
    );
    await clusterFormed(nodes, adminKey);
    await streamsLed(nats.urls);
  } catch (error) {
    await proxy.close();
    await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
    await nats.stop();
    if (options.dataDir === undefined) removeDir(root);
    throw error;
  }
  let stopped: Promise<number | string> | undefined;
  return {
    url: proxy.url,
    port: proxy.port,
    dataDir: root,
    adminKey,
    // The first node stands for the deployment where a test looks at "the process" (its exit code).
    child: nodes[0]!.child,
    nodes: nodes.map((node) => ({ url: node.url, port: node.port })),
    output: () => nodes.map((node, i) => `--- ${NODE_IDS[i]} ---\n${node.output()}`).join('\n'),
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      stopped ??= (async () => {
        await proxy.close();
        const codes = await Promise.all(nodes.map((node) => node.stop(signal)));
        await nats.stop();
        if (options.dataDir === undefined) removeDir(root);
        return codes.every((code) => code === codes[0]) ? (codes[0] as number | string) : codes.join(',');
      })();
      return stopped;
    },
  };
};

/**
 * `statehold node` needs an operator key on every node (serve can make one itself): the deployment
 * makes one and keeps it beside the data, so a restart on the same dir has the same key.
 */
const storedAdminKey = (root: string, generated: boolean): string => {
  const file = join(root, 'admin-key');
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const key = generated ? `shadm_${randomBytes(32).toString('base64url')}` : `test-admin-${randomBytes(6).toString('hex')}`;
  writeFileSync(file, key);
  return key;
};

/**
 * Waits until each of the cluster's streams has a leader: after a restart of the nats-servers the
 * streams elect theirs some seconds after the nodes are up, and a write meanwhile waits for it.
 */
const streamsLed = async (urls: string[]): Promise<void> => {
  const nc = await connect({ servers: urls });
  try {
    const jsm = await jetstreamManager(nc);
    // As long as a node waits for JetStream at start: on a loaded 2-core host three nats-servers
    // restarted together have taken more than 30 s to elect every stream's leader (CI, 2026-11-26).
    const deadline = Date.now() + 60_000;
    for (;;) {
      const streams = await jsm.streams.list().next();
      if (streams.length > 0 && streams.every((stream) => stream.cluster?.leader)) return;
      if (Date.now() > deadline) {
        const leaderless = streams.filter((stream) => !stream.cluster?.leader).map((stream) => stream.config.name);
        throw new Error(`the cluster's streams had no leaders after 60 s: ${leaderless.join(', ') || 'no streams listed'}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await nc.close();
  }
};

/**
 * Waits until every node sees all three members ready (each has caught up its share and owns it a beat
 * later), so the first request finds ownership settled. As long as `streamsLed` allows: after a restart
 * the nodes catch up only once JetStream has elected its leaders.
 */
const clusterFormed = async (nodes: NodeProcess[], adminKey: string): Promise<void> => {
  const readyMembers = (node: NodeProcess) =>
    fetch(`${node.url}/cluster`, { headers: { authorization: `Bearer ${adminKey}` } })
      .then(async (response) => {
        if (!response.ok) return 0;
        const { members } = (await response.json()) as { members?: ({ state?: string } | null)[] };
        return (members ?? []).filter((member) => member?.state === 'ready').length;
      })
      .catch(() => 0);
  const allReady = async () => (await Promise.all(nodes.map(readyMembers))).every((ready) => ready === nodes.length);
  await eventually(allReady, { timeoutMs: 60_000, intervalMs: 100 }).catch(() => {
    throw new Error(`the cluster did not form in 60 s:\n${nodes.map((n) => n.output().slice(-2_000)).join('\n')}`);
  });
};
