import { Agent, createServer, request, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * A loopback HTTP proxy that sends each request to the next of its targets in turn, so a client with
 * one base URL reaches a different cluster node with every request (keep-alive connections to the
 * proxy do not pin a node). A websocket upgrade goes to the next target too and is then piped as is.
 */
export interface RoundRobinProxy {
  url: string;
  port: number;
  close(): Promise<void>;
}

export const startRoundRobinProxy = async (targets: () => number[]): Promise<RoundRobinProxy> => {
  let turn = 0;
  const next = (): number => {
    const ports = targets();
    const port = ports[turn % ports.length] as number;
    turn += 1;
    return port;
  };
  // No keep-alive towards the nodes: a reused connection the node just closed for idleness would
  // fail a request that never reached it (a proxy's classic race), which is not what a test is about.
  const agent = new Agent({ keepAlive: false });
  const sockets = new Set<Socket>();

  const server = createServer((incoming, outgoing) => {
    const upstream = request(
      { host: '127.0.0.1', port: next(), method: incoming.method, path: incoming.url, headers: incoming.headers, agent },
      (answer: IncomingMessage) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.statusMessage, answer.rawHeaders);
        answer.pipe(outgoing);
      },
    );
    upstream.on('error', (error) => {
      if (!outgoing.headersSent) outgoing.writeHead(502, { 'content-type': 'application/json' });
      outgoing.end(JSON.stringify({ error: `round-robin proxy: ${error.message}`, code: 'proxy-error' }));
    });
    incoming.pipe(upstream);
  });

  server.on('upgrade', (incoming: IncomingMessage, client: Socket, head: Buffer) => {
    const upstream = connect(next(), '127.0.0.1');
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    upstream.on('connect', () => {
      const lines = [`${incoming.method} ${incoming.url} HTTP/1.1`];
      for (let i = 0; i < incoming.rawHeaders.length; i += 2) lines.push(`${incoming.rawHeaders[i]}: ${incoming.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async close() {
      for (const socket of sockets) socket.destroy();
      agent.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
};
