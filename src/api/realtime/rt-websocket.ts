import type uWS from 'uWebSockets.js';
import { invalidParameter, payloadTooLarge, ServiceError, unavailable } from '../../domain/errors.js';
import type { RtPeer } from './instance-channel.js';
import { answer, newSession, type RealtimeHub, type RealtimeLimits, type RtSession } from './realtime-hub.js';
import { errorText } from './rt-messages.js';

/**
 * The socket-level bounds of `/rt` (docs/realtime.md). A client's frames are small JSON objects; a
 * frame above `maxFrameBytes` is answered with an in-band 413, one above `hardFrameBytes` makes uWS
 * close the connection (it cannot be read at all).
 */
const RT_SOCKET_LIMITS = {
  maxFrameBytes: 4 * 1024,
  hardFrameBytes: 64 * 1024,
  /** The hard bound on a socket's unsent output: past it uWS skips publishes to it (and drops sends). */
  maxBackpressureBytes: 4 * 1024 * 1024,
  /**
   * A socket found with at least this much unsent output at two sweeps in a row (a second apart) gets
   * an error on each subscription and is closed; below the hard bound, so the error still fits.
   */
  slowBytes: 1024 * 1024,
  sweepMs: 1_000,
  /** How long a slow socket has to make room for its errors before it is cut without them. */
  closeGraceMs: 30_000,
  /** The client pings every 5 minutes (wire-protocol §6.2); uWS also pings a quiet socket to find dead peers. */
  idleTimeoutSeconds: 600,
  /** A socket with this much output unread gets no answers to its own frames (realtime-hub.ts `answer`). */
  answersBacklogBytes: 256 * 1024,
  /**
   * A socket beyond `maxSockets` is still taken (the real client does not retry a refused upgrade, and
   * reconnects at once after a close), its subscribes answered 503, and closed (1013) after this long:
   * its client comes back then, not in a tight loop. Beyond half as many more (16 at least), upgrades
   * get 503: the file descriptors must not run out (the real client does not retry that; docs/realtime.md).
   */
  refusedCloseMs: 10_000,
} as const;

interface SocketData {
  token: string;
  orgHeader: string | undefined;
  /** A credential given more than once in the query: every subscribe is refused with this. */
  credentialProblem?: ServiceError;
  session?: RtSession;
  slowSince?: number;
  /** Found too slow: its subscriptions stopped, their errors waiting for room in its output. */
  closing?: { since: number; requestIds: string[] };
  openedAt: number;
  /** Taken beyond maxSockets: only told so, then closed. */
  refused: boolean;
  /** Since when it has held no subscription (none made yet, or all ended). */
  emptySince: number | undefined;
}

let nextPeerId = 1;

/** An open uWS socket as the hub's RtPeer: nothing is written once it closed. */
class UwsPeer implements RtPeer {
  readonly id = nextPeerId++;
  open = true;

  constructor(private readonly ws: uWS.WebSocket<SocketData>) {}

  get backlogged(): boolean {
    return this.open && this.ws.getBufferedAmount() >= RT_SOCKET_LIMITS.answersBacklogBytes;
  }

  send(text: string): void {
    if (this.open) this.ws.cork(() => this.ws.send(text, false, false));
  }

  subscribe(topic: string): void {
    if (this.open) this.ws.subscribe(topic);
  }

  unsubscribe(topic: string): void {
    if (this.open) this.ws.unsubscribe(topic);
  }
}

export interface RealtimeEndpoint {
  /** Closes every socket (the node is stopping) and stops the slow-consumer sweep. */
  closeAll(): void;
  readonly socketCount: number;
  /** Upgrades accepted since the node started (a reconnect storm shows here). */
  readonly upgrades: number;
}

/** The query parameters of `/rt` that say who the caller is. */
const CREDENTIAL_PARAMS = ['token', 'x-statebacked-org-id'];

/**
 * Binds `GET /rt` on the uWS app to the hub. The upgrade is always accepted, whatever the token: a
 * refused upgrade leaves the real client without retries (and, with Node's `ws`, an uncaught error),
 * so a bad token is reported on each subscribe instead (wire-protocol §6.5).
 */
export const attachRealtime = (
  app: uWS.TemplatedApp,
  hub: RealtimeHub,
  limits: RealtimeLimits,
  logError: (message: string, error: unknown) => void,
): RealtimeEndpoint => {
  const sockets = new Set<uWS.WebSocket<SocketData>>();
  let upgrades = 0;
  let refusedCount = 0;
  const overflowBound = Math.max(16, Math.ceil(limits.maxSockets / 2));
  const full = unavailable(`this node holds as many realtime connections as it may (${limits.maxSockets}): try again later`);

  app.ws<SocketData>('/rt', {
    compression: 0,
    maxPayloadLength: RT_SOCKET_LIMITS.hardFrameBytes,
    maxBackpressure: RT_SOCKET_LIMITS.maxBackpressureBytes,
    idleTimeout: RT_SOCKET_LIMITS.idleTimeoutSeconds,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      const refused = sockets.size - refusedCount >= limits.maxSockets;
      if (refused && refusedCount >= overflowBound) {
        res.cork(() => {
          res.writeStatus('503 Service Unavailable');
          res.writeHeader('content-type', 'application/json');
          res.end(JSON.stringify({ error: full.message, code: full.code }), true);
        });
        return;
      }
      const query = new URLSearchParams(req.getQuery() ?? '');
      // Given twice, a proxy in front that checks one could be checking another credential than the node
      // (as with a repeated credential header over HTTP, http-server.ts): every subscribe is refused.
      const repeated = CREDENTIAL_PARAMS.find((name) => query.getAll(name).length > 1);
      const now = Date.now();
      const data: SocketData = {
        token: query.get('token') ?? '',
        orgHeader: query.get('x-statebacked-org-id') || undefined,
        ...(repeated === undefined
          ? {}
          : { credentialProblem: invalidParameter(repeated, `the query parameter ${repeated} is given more than once`) }),
        openedAt: now,
        refused,
        emptySince: now,
      };
      upgrades++;
      res.upgrade(
        data,
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws) => {
      const data = ws.getUserData();
      data.session = newSession(new UwsPeer(ws), data.token, data.orgHeader, limits, data.credentialProblem);
      sockets.add(ws);
      if (data.refused) refusedCount++;
    },
    message: (ws, message, isBinary) => {
      const data = ws.getUserData();
      const { session, closing } = data;
      if (!session || closing) return;
      try {
        if (data.refused) {
          if (!isBinary && message.byteLength <= RT_SOCKET_LIMITS.maxFrameBytes)
            hub.refuse(session, Buffer.from(message).toString('utf8'), full);
          return;
        }
        if (isBinary) {
          answer(session, errorText('', new ServiceError(400, 'invalid-parameter', 'frames must be JSON text, not binary')));
          return;
        }
        if (message.byteLength > RT_SOCKET_LIMITS.maxFrameBytes) {
          answer(session, errorText('', payloadTooLarge(`a frame may carry at most ${RT_SOCKET_LIMITS.maxFrameBytes} bytes`)));
          return;
        }
        // (decoded at once: uWS reuses the buffer when this returns)
        hub.handle(session, Buffer.from(message).toString('utf8'));
      } catch (error) {
        logError('a realtime frame could not be handled', error);
      }
    },
    close: (ws) => {
      if (sockets.delete(ws) && ws.getUserData().refused) refusedCount--;
      const session = ws.getUserData().session;
      if (!session) return;
      (session.peer as UwsPeer).open = false;
      hub.closed(session);
    },
  });

  // A subscriber that does not read would make the node buffer for it without end: past the hard
  // bound uWS skips it; one found behind at two sweeps in a row gets nothing more published, is told
  // why as soon as its output has room for that (uWS drops sends past the bound), and is closed.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const ws of sockets) {
      const data = ws.getUserData();
      if (data.refused) {
        if (now - data.openedAt >= RT_SOCKET_LIMITS.refusedCloseMs) ws.end(1013, 'the node holds as many connections as it may');
        continue;
      }
      // A socket that holds no subscription for a while is closed: the real client closes its own once
      // it has no subscriber left, so what stays is a client whose subscribes all failed (it reconnects
      // and subscribes again) or one that only holds a connection.
      const session = data.session;
      if (session && !data.closing && session.subscriptions.size === 0 && session.waiting.size === 0) {
        data.emptySince ??= now;
        if (now - data.emptySince >= limits.unsubscribedCloseMs) {
          ws.end(1000, 'no subscription');
          continue;
        }
      } else data.emptySince = undefined;
      const buffered = ws.getBufferedAmount();
      if (data.closing) {
        if (buffered < RT_SOCKET_LIMITS.maxBackpressureBytes) {
          const slow = unavailable(`this connection left more than ${RT_SOCKET_LIMITS.slowBytes} bytes of updates unread: closed`);
          for (const requestId of data.closing.requestIds) data.session?.peer.send(errorText(requestId, slow));
          ws.end(1008, 'slow consumer');
        } else if (now - data.closing.since > RT_SOCKET_LIMITS.closeGraceMs) ws.close();
        continue;
      }
      if (buffered < RT_SOCKET_LIMITS.slowBytes) {
        data.slowSince = undefined;
        continue;
      }
      if (data.slowSince === undefined) {
        data.slowSince = now;
        continue;
      }
      data.closing = { since: now, requestIds: session ? [...session.subscriptions.keys()] : [] };
      if (session) hub.closed(session);
    }
  }, RT_SOCKET_LIMITS.sweepMs);
  sweep.unref();

  return {
    closeAll() {
      clearInterval(sweep);
      for (const ws of [...sockets]) ws.end(1001, 'the node is stopping');
    },
    get socketCount() {
      return sockets.size;
    },
    get upgrades() {
      return upgrades;
    },
  };
};
