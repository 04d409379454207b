import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * How a cut looks to the two ends:
 * - `blackhole`: what a network partition does. Connections stay open, nothing gets through either
 *   way (what is sent meanwhile waits, as TCP retransmits it, and arrives on heal unless an end gave
 *   up first); a new connection is taken but reaches its target only on heal.
 * - `reset`: every connection is closed at once and new ones are closed as they come, as when a host
 *   is gone or a firewall rejects: the ends see the disconnect at once and reconnect after heal.
 */
export type CutMode = 'blackhole' | 'reset';

export interface TcpProxy {
  /** The loopback port to give the client in place of the target's. */
  port: number;
  /** `127.0.0.1:<port>`. */
  address: string;
  /** Whether it is cut now. */
  readonly isCut: boolean;
  /** Connections open through it now. */
  readonly connections: number;
  /** Stops every connection through it (see CutMode). */
  cut(mode?: CutMode): void;
  /** Lets traffic through again: a blackhole delivers what waited, in order. */
  heal(): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | undefined;
  /** What each side sent while the link was cut (or before the upstream connected). */
  toUpstream: Buffer[];
  toClient: Buffer[];
}

/**
 * A TCP proxy on loopback in front of one target (a nats-server's client port, or its cluster route
 * port): test/cluster-partition.test.ts puts one between a node and its nats-server and cuts it under
 * load. Bytes are forwarded as they come; cut() and heal() stop and restart every connection through
 * it at once, in either mode.
 */
export const startTcpProxy = async (targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> => {
  const pairs = new Set<Pair>();
  let mode: CutMode | undefined;

  const drop = (pair: Pair) => {
    pair.client.destroy();
    pair.upstream?.destroy();
    pairs.delete(pair);
  };

  const flush = (pair: Pair) => {
    const { client, upstream } = pair;
    if (mode !== undefined || !upstream || upstream.connecting) return;
    for (const chunk of pair.toUpstream.splice(0)) upstream.write(chunk);
    for (const chunk of pair.toClient.splice(0)) client.write(chunk);
    client.resume();
    upstream.resume();
  };

  const openUpstream = (pair: Pair) => {
    const upstream = connect(targetPort, targetHost);
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('connect', () => flush(pair));
    upstream.on('data', (chunk: Buffer) => {
      if (mode === undefined && pair.toClient.length === 0) {
        pair.client.write(chunk);
        return;
      }
      pair.toClient.push(chunk);
      // (stop reading: what the target sends next waits in the kernel's buffers, as behind a partition)
      upstream.pause();
    });
    upstream.on('error', () => drop(pair)).on('close', () => drop(pair));
  };

  const server: Server = createServer((client) => {
    client.setNoDelay(true);
    if (mode === 'reset') {
      client.destroy();
      return;
    }
    const pair: Pair = { client, upstream: undefined, toUpstream: [], toClient: [] };
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      const { upstream } = pair;
      if (mode === undefined && upstream && !upstream.connecting && pair.toUpstream.length === 0) {
        upstream.write(chunk);
        return;
      }
      pair.toUpstream.push(chunk);
      if (mode !== undefined) client.pause();
    });
    client.on('error', () => drop(pair)).on('close', () => drop(pair));
    // Behind a blackhole a new connection reaches its target only when healed.
    if (mode === undefined) openUpstream(pair);
  });

  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });

  return {
    port,
    address: `127.0.0.1:${port}`,
    get isCut() {
      return mode !== undefined;
    },
    get connections() {
      return pairs.size;
    },
    cut(how: CutMode = 'blackhole') {
      mode = how;
      for (const pair of [...pairs]) {
        if (how === 'reset') {
          drop(pair);
          continue;
        }
        pair.client.pause();
        pair.upstream?.pause();
      }
    },
    heal() {
      mode = undefined;
      for (const pair of [...pairs]) {
        if (!pair.upstream) openUpstream(pair);
        else flush(pair);
      }
    },
    async close() {
      mode = 'reset';
      for (const pair of [...pairs]) drop(pair);
      await new Promise((resolve) => server.close(resolve));
    },
  };
};
