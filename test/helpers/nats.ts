import { connect, type NatsConnection } from '@nats-io/transport-node';
// @ts-expect-error: a plain ES module of the cluster tooling, without types
import { natsServerAvailable, startNatsServers } from '../../cluster/nats-servers.mjs';

export interface NatsServers {
  urls: string[];
  dir: string;
  kill(index: number, signal?: NodeJS.Signals): Promise<void>;
  restart(index: number): Promise<void>;
  stop(): Promise<void>;
}

/** Real nats-server processes with JetStream (1, or a cluster of 3) on loopback ports. */
export const startNats = (count = 1): Promise<NatsServers> => startNatsServers({ count });

/** Cluster tests need Debian's nats-server; CI installs it, a laptop may not have it. */
export const natsMissing = (): string | false => (natsServerAvailable() ? false : 'nats-server is not installed (apt-get install nats-server)');

export const connectTo = (servers: NatsServers, name: string): Promise<NatsConnection> => connect({ servers: servers.urls, name, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
