// Starts real nats-server processes (Debian's 2.9) with JetStream on loopback: one, or a cluster of
// three with routes between them. Used by the tests and by `make cluster-up`. Each server gets its
// own server_name, client, route and monitoring ports and its own store dir (measured-here.md: a
// cluster needs distinct names and monitoring ports).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Whether a nats-server binary is on the PATH (CI installs Debian's; the cluster tests skip without it). */
export const natsServerAvailable = () => spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status === 0;

/**
 * The loopback ports to pick from: below the kernel's ephemeral range, where outgoing connections take
 * their source ports. A port the kernel picked (listen on 0) and released comes from that range, and
 * any connection made meanwhile can take it before its server binds it (seen in CI: a nats-server's
 * route port "address already in use"). Undefined where that range leaves too little below it.
 */
const pickRange = () => {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return low - 20_000 >= 2_000 ? { from: 20_000, to: low - 1 } : undefined;
  } catch {
    return undefined;
  }
};

/** Holds `port` (0: one the kernel picks) open on loopback; undefined when it is taken. */
const hold = (port) =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (error) => (error.code === 'EADDRINUSE' || error.code === 'EACCES' ? resolve(undefined) : reject(error)));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });

/**
 * `count` distinct free loopback TCP ports: all held open together while they are picked (so no two are
 * the same), then released for their users (a small race with other programs binding the same port).
 */
export const freePorts = async (count) => {
  const range = pickRange();
  const servers = [];
  for (let tries = 0; servers.length < count; tries++) {
    const port = range && tries < count * 50 ? range.from + Math.floor(Math.random() * (range.to - range.from + 1)) : 0;
    const server = await hold(port);
    if (server) servers.push(server);
  }
  const ports = servers.map((server) => server.address().port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
};

export const freePort = async () => (await freePorts(1))[0];

const configText = ({ name, port, httpPort, storeDir, cluster, noAdvertise }) => {
  const lines = [
    `server_name: ${name}`,
    `listen: 127.0.0.1:${port}`,
    `http: 127.0.0.1:${httpPort}`,
    `jetstream { store_dir: "${storeDir}", max_memory_store: 256MB, max_file_store: 4GB }`,
    // A commit carries the context (up to 400 KB) with each of its history records: above NATS's 1 MB default.
    'max_payload: 8MB',
  ];
  if (cluster) {
    // (no_advertise: clients are not told of the other servers, and keep to the URLs they were given)
    const advertise = noAdvertise ? ', no_advertise: true' : '';
    // (a route's INFO names the server's route address, and a server that hears of a server it has no
    // route to yet dials that address: an "implicit" route, tried once. no_advertise does not stop this.
    // With routes through proxies each server names a port nobody listens on, so such a dial fails and
    // every route stays the configured one, through its proxy.)
    const gossip = cluster.advertise ? `, advertise: "127.0.0.1:${cluster.advertise}"` : '';
    lines.push(
      `cluster { name: ${cluster.name}, listen: 127.0.0.1:${cluster.port}, routes: [${cluster.routes.map((p) => `nats-route://127.0.0.1:${p}`).join(', ')}]${advertise}${gossip} }`,
    );
  }
  return `${lines.join('\n')}\n`;
};

/** Whether a TCP connection to the loopback `port` is taken (then closed at once). */
const acceptsClients = (port) =>
  new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => (socket.destroy(), resolve(false)));
  });

/** A server that could not bind a port picked free for it (another program took it meanwhile). */
class PortTakenError extends Error {}

/**
 * Resolves once `server` answers on its monitoring port as itself (its name and client port: a port
 * picked free can be taken by another program before the server binds it, which then answers there)
 * and, in a cluster, the JetStream meta group has a leader. Throws at once when the server exited.
 */
const waitReady = async (server, clustered, deadline) => {
  for (;;) {
    if (server.process && (server.process.exitCode !== null || server.process.signalCode !== null)) {
      const taken = /address already in use/i.test(server.output);
      throw new (taken ? PortTakenError : Error)(`nats-server ${server.name} exited at start${taken ? ' (a port was taken)' : ''}`);
    }
    try {
      const varz = await (await fetch(`http://127.0.0.1:${server.httpPort}/varz`)).json();
      if (varz.server_name === server.name && varz.port === server.port) {
        const response = await fetch(`http://127.0.0.1:${server.httpPort}/jsz`);
        if (response.ok) {
          const jsz = await response.json();
          // (the monitoring port answers before the client port listens: a server opens it only once
          // JetStream is up, and a client that dials it sooner is refused; seen in a CI run)
          if ((!clustered || jsz.meta_cluster?.leader) && (await acceptsClients(server.port))) return;
        }
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`nats-server with monitoring port ${server.httpPort} was not ready in time`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

/**
 * Starts `count` nats-servers (1, or 3 for a JetStream cluster). Resolves with their client URLs and a
 * stop(); `dir` holds configs and store dirs (a temp dir unless given; removed by stop unless kept).
 *
 * `routeVia(from, to, routePort)` (a cluster only): the port server `from` (0-based) dials for its route
 * to server `to`, whose route port is `routePort`; a test answers with a TCP proxy's port in front of
 * it (test/helpers/tcp-proxy.ts) to cut routes, or with `routePort` for a direct route. Each server's
 * `routes` then lists what it answered, its cluster block gets no_advertise, and the address a server
 * gives of itself to the others (which they pass on, and dial when they have no route to it yet) is a
 * port nobody listens on: only the routes given here are made (see each server's /routez). Each
 * server's `routes` in the result: the ports it dials.
 * @param {{ count?: number, dir?: string, keep?: boolean, readyMs?: number, detached?: boolean, noAdvertise?: boolean, routeVia?: (from: number, to: number, routePort: number) => number | Promise<number>, log?: (line: string) => void }} [options]
 */
export const startNatsServers = async (options = {}) => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      // (new ports, unless the caller made its proxies for these)
      if (!(error instanceof PortTakenError) || options.routeVia || attempt >= 3) throw error;
    }
  }
};

/** @param {Parameters<typeof startNatsServers>[0]} [options] */
const startOnce = async ({
  count = 1,
  dir,
  keep = false,
  readyMs = 20_000,
  detached = false,
  noAdvertise = false,
  routeVia,
  log = () => {},
} = {}) => {
  const root = dir ?? mkdtempSync(join(tmpdir(), 'statehold-nats-'));
  mkdirSync(root, { recursive: true });
  // (with routeVia, one more: the unused port each server names as its route address)
  const picked = await freePorts(count * 3 + (routeVia ? 1 : 0));
  const ports = Array.from({ length: count }, (_, i) => ({
    port: picked[3 * i],
    httpPort: picked[3 * i + 1],
    routePort: picked[3 * i + 2],
  }));
  // The ports each server dials for its routes (through routeVia when given), asked in order.
  const routesOf = [];
  for (const [i] of ports.entries()) {
    const routes = [];
    for (const [j, q] of ports.entries()) if (j !== i) routes.push(routeVia ? await routeVia(i, j, q.routePort) : q.routePort);
    routesOf.push(routes);
  }
  const servers = ports.map((p, i) => {
    const name = `nats-${i + 1}`;
    const storeDir = join(root, name);
    mkdirSync(storeDir, { recursive: true });
    const routes = count > 1 ? routesOf[i] : [];
    const cluster =
      count > 1 ? { name: 'statehold', port: p.routePort, routes, advertise: routeVia ? picked[3 * count] : undefined } : undefined;
    const configPath = join(root, `${name}.conf`);
    writeFileSync(
      configPath,
      configText({ name, port: p.port, httpPort: p.httpPort, storeDir, cluster, noAdvertise: noAdvertise || routeVia !== undefined }),
    );
    return { name, configPath, ...p, routes, url: `nats://127.0.0.1:${p.port}`, process: undefined, output: '' };
  });
  const start = (server) => {
    // Detached (make cluster-up): the server outlives the launcher, its output goes to a file beside its config.
    const child = detached
      ? spawn('nats-server', ['-c', server.configPath, '-l', join(root, `${server.name}.log`)], { stdio: 'ignore', detached: true })
      : spawn('nats-server', ['-c', server.configPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    if (detached) child.unref();
    child.stdout?.on('data', (chunk) => (server.output = (server.output + chunk).slice(-20_000)));
    child.stderr?.on('data', (chunk) => (server.output = (server.output + chunk).slice(-20_000)));
    server.process = child;
    server.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    log(`${server.name}: pid ${child.pid} on ${server.url}`);
  };
  servers.forEach(start);
  const deadline = Date.now() + readyMs;
  await Promise.all(servers.map((server) => waitReady(server, count > 1, deadline))).catch(async (error) => {
    await Promise.all(servers.map((server) => stopOne(server, 'SIGKILL')));
    if (!dir) rmSync(root, { recursive: true, force: true });
    const failed = new (error instanceof PortTakenError ? PortTakenError : Error)(error.message);
    failed.message += `\n${servers.map((s) => `${s.name}:\n${s.output.slice(-2_000)}`).join('\n')}`;
    throw failed;
  });
  return {
    dir: root,
    servers,
    urls: servers.map((server) => server.url),
    /** Kills one server (a fault test), or stops it. */
    async kill(index, signal = 'SIGKILL') {
      await stopOne(servers[index], signal);
    },
    /** Stops one server's process where it stands (SIGSTOP: a hung server, its connections left open), or lets it go on. */
    pause(index) {
      servers[index].process?.kill('SIGSTOP');
    },
    resume(index) {
      servers[index].process?.kill('SIGCONT');
    },
    /** Starts a stopped server again with the same config and store. */
    async restart(index) {
      start(servers[index]);
      await waitReady(servers[index], count > 1, Date.now() + readyMs);
    },
    async stop() {
      await Promise.all(servers.map((server) => stopOne(server, 'SIGTERM')));
      if (!keep && !dir) rmSync(root, { recursive: true, force: true });
    },
  };
};

const stopOne = async (server, signal) => {
  const child = server.process;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  // (a paused server takes the signal only once it goes on)
  child.kill('SIGCONT');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await server.exited;
  clearTimeout(timer);
};
