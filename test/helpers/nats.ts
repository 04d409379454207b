import { connect, type NatsConnection } from '@nats-io/transport-node';
import { openLmdbNodeStore } from '../../src/store/lmdb/lmdb-node-store.js';
import { CLUSTER_NODE_START_MS, type NodeProcess, removeDir, startNode, tempDataDir } from './node-process.js';
import { natsServerAvailable, startNatsServers } from '../../cluster/nats-servers.mjs';

/** The part of a tap test the helpers use. */
interface Teardowns {
  teardown(fn: () => unknown): void;
}

export interface NatsServers {
  urls: string[];
  dir: string;
  /** Each server's name and monitoring port (GET /connz, /jsz). */
  servers: Array<{ name: string; httpPort: number }>;
  kill(index: number, signal?: NodeJS.Signals): Promise<void>;
  /** SIGSTOP (a hung server: its connections stay open) and SIGCONT. */
  pause(index: number): void;
  resume(index: number): void;
  restart(index: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Real nats-server processes with JetStream (1, or a cluster of 3) on loopback ports. `noAdvertise`:
 * the servers do not tell clients of each other, so a client keeps to the URLs it was given (one
 * behind a TCP proxy stays behind it when it reconnects).
 */
export const startNats = (count = 1, options: { noAdvertise?: boolean } = {}): Promise<NatsServers> =>
  startNatsServers({ count, ...options });

/** Cluster tests need Debian's nats-server; CI installs it, a laptop may not have it. */
export const natsMissing = (): string | false =>
  natsServerAvailable() ? false : 'nats-server is not installed (apt-get install nats-server)';

export const connectTo = (servers: NatsServers, name: string): Promise<NatsConnection> =>
  connect({ servers: servers.urls, name, maxReconnectAttempts: -1, reconnectTimeWait: 100 });

/**
 * A node's local side for store tests: a temp LMDB node store and a NATS connection, closed (after
 * whatever `beforeClose` registered, such as the node's logs) and removed when the test ends.
 */
export const localNode = async (t: Teardowns, servers: NatsServers, name: string) => {
  const dir = tempDataDir();
  const store = openLmdbNodeStore(dir);
  const nc = await connectTo(servers, name);
  const closers: Array<() => Promise<unknown>> = [];
  t.teardown(async () => {
    for (const close of closers) await close();
    await nc.close();
    await store.close();
    removeDir(dir);
  });
  return { store, nc, beforeClose: (close: () => Promise<unknown>) => closers.push(close) };
};

/** `statehold node` processes on the given NATS servers, with one admin key and one master key, stopped when the test ends. */
export const startClusterNodes = async (
  t: Teardowns,
  servers: NatsServers,
  ids: string[],
  options: {
    adminKey: string;
    args?: string[];
    /** The NATS URLs a node connects to (all the servers' when not given): a test puts a TCP proxy in between (tcp-proxy.ts). */
    natsFor?: (id: string, index: number) => string[];
    /** A data dir of the test's for a node (kept when the node stops, so a restart finds it); a temp one, removed with the node, when not given. */
    dataDirFor?: (id: string) => string | undefined;
    /** More environment variables for the nodes. */
    env?: Record<string, string>;
  },
) => {
  const masterKey = Buffer.alloc(32, 7).toString('base64');
  const nodes: NodeProcess[] = [];
  for (const [index, id] of ids.entries()) {
    const urls = options.natsFor?.(id, index) ?? servers.urls;
    const dataDir = options.dataDirFor?.(id);
    const node = await startNode({
      command: 'node',
      ...(dataDir === undefined ? {} : { dataDir }),
      args: [
        '--admin-key',
        options.adminKey,
        '--nats',
        urls.join(','),
        '--node-id',
        id,
        '--replicas',
        String(servers.urls.length),
        ...(options.args ?? []),
      ],
      env: { ...options.env, STATEHOLD_MASTER_KEY: masterKey },
      generatedAdminKey: true,
      startTimeoutMs: CLUSTER_NODE_START_MS,
    });
    nodes.push(node);
    t.teardown(() => node.stop('SIGKILL'));
  }
  return nodes;
};
