import { STATUS_CODES } from 'node:http';
import uWS from 'uWebSockets.js';
import { invalidParameter, payloadTooLarge, ServiceError } from '../domain/errors.js';
import type { Logger } from '../domain/logger.js';
import { clipped } from '../domain/names.js';
import { corsHeaders, preflightHeaders } from './cors.js';
import { errorResponse } from './error-response.js';
import type { ApiRequest, ApiResponse } from './http-types.js';
import { requestIdOf } from './request-id.js';
import type { RealtimeHub, RealtimeLimits } from './realtime/realtime-hub.js';
import { attachRealtime, type RealtimeEndpoint } from './realtime/rt-websocket.js';
import type { Router, RouteMatch } from './router.js';

/** uWS's listen option that leaves SO_REUSEPORT off (its ListenOptions, which the module does not export at runtime). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/** The CORS headers every answer carries unless its route set them itself. */
const CORS_ENTRIES = Object.entries(corsHeaders);

/**
 * Headers that say who the caller is: given twice, a proxy in front that checks one of them could be
 * checking another credential than the node, which would take the last. Such a request is refused.
 */
const CREDENTIAL_HEADERS = new Set(['authorization', 'x-statebacked-org-id', 'x-statebacked-act']);

/** Where the answer to one request stands. */
interface AnswerState {
  aborted: boolean;
  answered?: boolean;
  /** A HEAD request: answered without the body. */
  head?: boolean;
  /** Sent back as `x-request-id` on every answer, and named in log lines about the request. */
  requestId: string;
  /** When it came (performance.now()), for `onAnswered`; 0 when nobody listens. */
  startedAt: number;
  method: string;
  /** The pattern of the route that matched, once one did. */
  route?: string;
}

/** Methods a request is counted under by name; others as OTHER (a label must not take any value a client sends). */
const COUNTED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

interface HttpServerOptions {
  router: Router;
  host: string;
  port: number;
  maxBodyBytes: number;
  logger: Logger;
  /** `GET /rt` websockets (wire-protocol §6), when given. */
  realtime?: { hub: RealtimeHub; limits: RealtimeLimits };
  /**
   * Told of every answer: the route's pattern (`(unmatched)` when none matched), never the raw path,
   * so that what is counted by it stays a bounded set (GET /metrics).
   */
  onAnswered?: (method: string, route: string, status: number, seconds: number) => void;
  /**
   * Verifies the credential a request's headers carry, throwing what its route would answer (a 403):
   * run before the body of a request to a credentialed route is read (Router.credentialed).
   */
  checkCredential?: (headers: Readonly<Record<string, string>>) => void;
}

/**
 * The HTTP front end on uWebSockets.js. Every request goes through the one router. uWS rules kept here:
 * request data (method, url, headers) is read before the first await; after `onAborted` fires nothing
 * is written to the response; writes are corked.
 */
export class HttpServer {
  private listenSocket: uWS.us_listen_socket | undefined;
  private app: uWS.TemplatedApp | undefined;
  private realtime: RealtimeEndpoint | undefined;
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];
  private draining = false;

  private constructor(private readonly options: HttpServerOptions) {}

  static async start(options: HttpServerOptions): Promise<HttpServer> {
    const server = new HttpServer(options);
    await server.listen();
    return server;
  }

  get port(): number {
    if (!this.listenSocket) throw new Error('the server is not listening');
    return uWS.us_socket_local_port(this.listenSocket as unknown as uWS.us_socket);
  }

  /** Realtime sockets open now, and upgrades accepted so far. */
  get websockets(): { sockets: number; upgrades: number } {
    return { sockets: this.realtime?.socketCount ?? 0, upgrades: this.realtime?.upgrades ?? 0 };
  }

  /** Sends `text` to every websocket subscribed to `topic`, serialized once (the realtime fan-out). */
  publish(topic: string, text: string): void {
    this.app?.publish(topic, text, false, false);
  }

  /**
   * Stops accepting connections and closes the realtime sockets, then resolves once every request in
   * flight has been answered.
   */
  async drain(): Promise<void> {
    this.draining = true;
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
    this.realtime?.closeAll();
    if (this.inFlight === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private listen(): Promise<void> {
    const app = uWS.App();
    this.app = app;
    if (this.options.realtime) this.realtime = attachRealtime(app, this.options.realtime.hub, this.options.realtime.limits, this.logError);
    app.any('/*', (res, req) => this.handle(res, req));
    return new Promise((resolve, reject) => {
      // Exclusive: by default uWS sets SO_REUSEPORT, so a second node started on a port in use "listened"
      // too, and the kernel split connections between two nodes with different data (seen by hand).
      const listen = app.listen as unknown as (
        host: string,
        port: number,
        options: number,
        cb: (socket: uWS.us_listen_socket | false) => void,
      ) => void;
      listen.call(app, this.options.host, this.options.port, LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) => {
        if (!socket) {
          reject(new Error(`could not listen on ${this.options.host}:${this.options.port} (is another process using that port?)`));
          return;
        }
        this.listenSocket = socket;
        resolve();
      });
    });
  }

  private handle(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    const method = req.getMethod().toUpperCase();
    const state: AnswerState = {
      aborted: false,
      requestId: '',
      startedAt: this.options.onAnswered ? performance.now() : 0,
      method,
    };
    res.onAborted(() => {
      state.aborted = true;
      // (also runs when the node itself closes a connection it answered: count each request once)
      if (!state.answered) this.finished();
    });
    this.inFlight++;

    const path = req.getUrl();
    const query = new URLSearchParams(req.getQuery() ?? '');
    const headers: Record<string, string> = {};
    let conflictingLength = false;
    let repeatedCredential: string | undefined;
    req.forEach((key, value) => {
      if (headers[key] !== undefined) {
        if (key === 'content-length' && headers[key] !== value) conflictingLength = true;
        if (CREDENTIAL_HEADERS.has(key)) repeatedCredential ??= key;
      }
      headers[key] = value;
    });
    state.requestId = requestIdOf(headers['x-request-id']);
    // A HEAD is answered as the GET would be, without the body (RFC 9110 §9.3.2).
    if (method === 'HEAD') state.head = true;

    if (conflictingLength) {
      // Which one frames the body is ambiguous (a request-smuggling vector behind a proxy): the connection
      // is closed at once, without an answer. Answering first would not do: uWS runs the requests it
      // already read after this one on the same connection (and a closed response must not be touched).
      res.close();
      return;
    }

    const declaredLength = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    const hasBody = (declaredLength !== undefined && declaredLength > 0) || headers['transfer-encoding'] !== undefined;
    // Answered before their bodies are read: the connection is closed after the answer when there is
    // one, rather than let the body be taken for the next request.
    if (method === 'OPTIONS') {
      this.respond(res, state, { status: 204, headers: preflightHeaders }, hasBody);
      return;
    }
    if (repeatedCredential !== undefined) {
      this.respond(
        res,
        state,
        errorResponse(invalidParameter(repeatedCredential, `the ${repeatedCredential} header may be given only once`), this.logError),
        hasBody,
      );
      return;
    }
    const match = this.options.router.match(state.head ? 'GET' : method, path);
    const maxBodyBytes = hasBody && match.kind === 'found' ? Math.min(match.maxBodyBytes ?? Infinity, this.options.maxBodyBytes) : 0;
    const refusal = hasBody ? this.refusalBeforeBody(match, method, path, headers, state, declaredLength, maxBodyBytes) : undefined;
    if (refusal) {
      this.refuseUnread(res, state, refusal, declaredLength);
      return;
    }
    const remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString('utf8');
    const request: ApiRequest = { method, path, params: {}, query, headers, body: Buffer.alloc(0), remoteAddress };
    if (!hasBody) {
      this.dispatchSafely(res, state, request, match);
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    res.onData((chunk, isLast) => {
      if (state.aborted) return;
      received += chunk.byteLength;
      if (received > maxBodyBytes) {
        this.respond(
          res,
          state,
          errorResponse(payloadTooLarge(`the request body may have at most ${maxBodyBytes} bytes`), this.logError),
          true,
        );
        return;
      }
      // uWS reuses the chunk's memory once this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) {
        request.body = Buffer.concat(chunks);
        this.dispatchSafely(res, state, request, match);
      }
    });
  }

  /**
   * What a request with a body is answered without its body being kept: no route takes it, its route
   * needs a credential that its headers do not carry, or it says it is larger than its route takes.
   * So a caller without a key cannot make the node hold up to --max-body-bytes.
   */
  private refusalBeforeBody(
    match: RouteMatch,
    method: string,
    path: string,
    headers: Record<string, string>,
    state: AnswerState,
    declaredLength: number | undefined,
    maxBodyBytes: number,
  ): ApiResponse | undefined {
    if (match.kind !== 'found' || this.refusesWhileDraining(path)) return this.answerWithoutRoute(match, method, path);
    state.route = match.pattern;
    if (match.credential && this.options.checkCredential) {
      try {
        this.options.checkCredential(headers);
      } catch (error) {
        return errorResponse(error, this.logError);
      }
    }
    if (declaredLength !== undefined && declaredLength > maxBodyBytes)
      return errorResponse(payloadTooLarge(`the request body may have at most ${maxBodyBytes} bytes`), this.logError);
    return undefined;
  }

  /**
   * Answers a request whose body is not kept. A body of at most --max-body-bytes is read and thrown
   * away first, so that a client still sending it gets the answer (closing on it can reset the
   * connection before the client reads it, and a proxy in front then answers an error of its own);
   * the connection stays usable. A larger one is not waited for: the answer goes at once and the
   * connection is closed.
   */
  private refuseUnread(res: uWS.HttpResponse, state: AnswerState, response: ApiResponse, declaredLength: number | undefined): void {
    const drainable = this.options.maxBodyBytes;
    if (declaredLength !== undefined && declaredLength > drainable) {
      this.respond(res, state, response, true);
      return;
    }
    let received = 0;
    res.onData((chunk, isLast) => {
      if (state.aborted || state.answered) return;
      received += chunk.byteLength;
      if (received > drainable) this.respond(res, state, response, true);
      else if (isLast) this.respond(res, state, response);
    });
  }

  /** Route errors become answers inside dispatch; this only keeps a failure to answer from escaping. */
  private dispatchSafely(res: uWS.HttpResponse, state: AnswerState, request: ApiRequest, match: RouteMatch): void {
    this.dispatch(res, state, request, match).catch((error: unknown) => this.logError('could not answer a request', error));
  }

  private async dispatch(res: uWS.HttpResponse, state: AnswerState, request: ApiRequest, match: RouteMatch): Promise<void> {
    if (match.kind !== 'found' || this.refusesWhileDraining(request.path)) {
      this.respond(res, state, this.answerWithoutRoute(match, request.method, request.path));
      return;
    }
    let response: ApiResponse;
    try {
      request.params = match.params;
      state.route = match.pattern;
      response = await match.handler(request);
    } catch (error) {
      // (only a failure is logged, so only a failure pays for naming the request)
      response = errorResponse(error, (message, failure) => this.logError(message, failure, requestFields(request, state)));
    }
    this.respond(res, state, response);
  }

  private refusesWhileDraining(path: string): boolean {
    return this.draining && path !== '/health';
  }

  /** The answer when no route runs: the node shutting down, or no route for the method and path. */
  private answerWithoutRoute(match: RouteMatch, method: string, path: string): ApiResponse {
    if (this.refusesWhileDraining(path))
      return errorResponse(new ServiceError(503, 'unavailable', 'the node is shutting down'), this.logError);
    if (match.kind === 'no-such-thing') return errorResponse(new ServiceError(404, 'not-found', match.message), this.logError);
    if (match.kind === 'bad-path') return errorResponse(new ServiceError(400, 'invalid-parameter', match.message), this.logError);
    if (match.kind !== 'wrong-method')
      return errorResponse(new ServiceError(404, 'not-found', `no route for ${method} ${clipped(path)}`), this.logError);
    const allow = match.allowed.includes('GET') && !match.allowed.includes('HEAD') ? [...match.allowed, 'HEAD'] : match.allowed;
    const refused = errorResponse(
      new ServiceError(405, 'invalid-parameter', `${method} is not allowed on ${clipped(path)}; use ${allow.join(', ')}`),
      this.logError,
    );
    return { ...refused, headers: { ...refused.headers, allow: allow.join(', ') } };
  }

  private respond(res: uWS.HttpResponse, state: AnswerState, response: ApiResponse, close = false): void {
    if (state.aborted || state.answered) return;
    state.answered = true;
    const body = response.raw ? response.raw.data : response.body === undefined ? undefined : JSON.stringify(response.body);
    const contentType = response.raw ? response.raw.contentType : 'application/json';
    res.cork(() => {
      res.writeStatus(`${response.status} ${STATUS_CODES[response.status] ?? 'Unknown'}`);
      res.writeHeader('x-request-id', state.requestId);
      // (the route's own headers may override CORS ones; no merged object per answer)
      for (const [name, value] of CORS_ENTRIES) if (response.headers?.[name] === undefined) res.writeHeader(name, value);
      if (response.headers) for (const name of Object.keys(response.headers)) res.writeHeader(name, response.headers[name] as string);
      if (body === undefined) {
        // end() rather than endWithoutBody(): the latter omits Content-Length and keep-alive clients then wait for a body.
        res.end(undefined, close);
      } else if (state.head) {
        // The length the GET body has, written by hand: uWS 20.30 takes endWithoutBody(length) for a
        // response whose body is still to come (the connection then hangs), and writes no length of its
        // own when endWithoutBody gets no arguments.
        res.writeHeader('content-type', contentType);
        res.writeHeader('content-length', String(Buffer.byteLength(body)));
        if (close) res.endWithoutBody(undefined, true);
        else res.endWithoutBody();
      } else {
        res.writeHeader('content-type', contentType);
        res.end(body, close);
      }
    });
    this.finished();
    if (this.options.onAnswered) {
      const method = COUNTED_METHODS.has(state.method) ? state.method : 'OTHER';
      this.options.onAnswered(method, state.route ?? '(unmatched)', response.status, (performance.now() - state.startedAt) / 1000);
    }
  }

  private finished(): void {
    this.inFlight--;
    if (this.inFlight === 0 && this.idleWaiters.length > 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private readonly logError = (message: string, error: unknown, fields?: Record<string, string>): void => {
    this.options.logger.error(message, { ...fields, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  };
}

/** What a log line about a request names: its id, and the org, machine and instance where the request says them. */
const requestFields = (request: ApiRequest, state: AnswerState): Record<string, string> => {
  const fields: Record<string, string> = { requestId: state.requestId };
  const org = request.headers['x-statebacked-org-id'];
  if (org !== undefined) fields.org = clipped(org);
  if (request.params.machine !== undefined) fields.machine = request.params.machine;
  if (request.params.instance !== undefined) fields.instance = request.params.instance;
  if (state.route !== undefined) fields.route = state.route;
  return fields;
};
