// Three nats-servers whose routes to and from one of them go through TCP proxies of this process, with
// a connection to each server alone: what the probes of a server cut off from the others start with.
// Needs Debian's nats-server and `make test-build` (it uses the tests' TCP proxy).
import { connect } from '@nats-io/transport-node';
import { startNatsServers } from '../../cluster/nats-servers.mjs';
import { startTcpProxy } from '../../dist-test/test/helpers/tcp-proxy.js';

/** Starts them; `cut(mode)` and `heal()` act on every proxied route, `stop()` ends it all. */
export const startWithCutOffServer = async (cutOff) => {
  const proxies = [];
  const nats = await startNatsServers({
    count: 3,
    routeVia: async (from, to, routePort) => {
      if (from !== cutOff && to !== cutOff) return routePort;
      const proxy = await startTcpProxy(routePort);
      proxies.push(proxy);
      return proxy.port;
    },
  });
  const ncs = [];
  for (const url of nats.urls) ncs.push(await connect({ servers: [url], maxReconnectAttempts: -1, reconnectTimeWait: 100 }));
  return {
    nats,
    ncs,
    cut: (mode = 'blackhole') => {
      for (const proxy of proxies) proxy.cut(mode);
    },
    heal: () => {
      for (const proxy of proxies) proxy.heal();
    },
    stop: async () => {
      for (const nc of ncs) await nc.close().catch(() => undefined);
      for (const proxy of proxies) await proxy.close();
      await nats.stop();
    },
  };
};
