import type { Session } from './session.js';

/** What `/rt` pushes for a subscribed instance (wire-protocol §6.3). */
export interface InstanceUpdate {
  ts: number;
  state: unknown;
  publicContext: Record<string, unknown>;
  tags: string[];
  done: boolean;
}

export type LiveStatus = 'connecting' | 'live' | 'reconnecting';

interface Handlers {
  update(update: InstanceUpdate): void;
  error(message: string): void;
  status(status: LiveStatus): void;
}

/**
 * One instance's updates over the node's `/rt` websocket: the current state on subscribing, then
 * every committed one. A dropped socket is opened again after a growing pause (never a hot loop),
 * and subscribes again. Returns the function that ends it.
 */
export const watchInstance = (session: Session, machine: string, instance: string, on: Handlers): (() => void) => {
  let socket: WebSocket | undefined;
  let ended = false;
  let retryMs = 500;
  let retry: number | undefined;
  let ping: number | undefined;
  const requestId = Math.random().toString(36).slice(2);

  const open = () => {
    const url = new URL('/rt', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('token', session.token);
    if (session.orgId) url.searchParams.set('x-statebacked-org-id', session.orgId);
    on.status(retry === undefined ? 'connecting' : 'reconnecting');
    const ws = new WebSocket(url);
    socket = ws;
    ws.onopen = () => {
      retryMs = 500;
      ws.send(JSON.stringify({ type: 'subscribe-to-instance', machineName: machine, machineInstanceName: instance, requestId }));
      // The node drops sockets silent for longer than its idle window; the client pings every 5 minutes.
      ping = window.setInterval(() => ws.send(JSON.stringify({ type: 'ping' })), 60_000);
    };
    ws.onmessage = (message) => {
      let data: { type?: string; machineName?: string; machineInstanceName?: string; status?: number; code?: string };
      try {
        data = JSON.parse(String(message.data)) as typeof data;
      } catch {
        return;
      }
      if (data.type === 'instance-update' && data.machineName === machine && data.machineInstanceName === instance) {
        on.status('live');
        on.update(data as unknown as InstanceUpdate);
      } else if (data.type === 'error') {
        on.error(`live updates refused: ${data.status ?? ''} ${data.code ?? ''}`.trim());
      }
    };
    ws.onclose = () => {
      window.clearInterval(ping);
      if (ended) return;
      on.status('reconnecting');
      retry = window.setTimeout(open, retryMs);
      retryMs = Math.min(retryMs * 2, 15_000);
    };
  };
  open();
  return () => {
    ended = true;
    window.clearTimeout(retry);
    window.clearInterval(ping);
    socket?.close();
  };
};
