/**
 * HTTP APIs (wire-protocol §3.14): a request to `/http-api/{orgId}/machines/{machine}/{slug}` runs the
 * machine's current version's `httpApiMapper[slug].handler(request)` in its isolate, which names an
 * instance, an event and the authContext to send it with (and an initial context to create the
 * instance with when it does not exist yet). The event goes through the runtime's normal create and
 * send paths (allowWrite, transition, settle, durable commit); then
 * `httpApiMapper[slug].responseMapper({ state, context, result })` shapes the HTTP answer. No State
 * Backed token is involved: the handler authenticates the raw request itself.
 */
import { machineCodeFailed, notFound, rateLimited, ServiceError, unavailable } from '../domain/errors.js';
import { isPrettyId } from '../domain/ids.js';
import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import { clipped, isSlug } from '../domain/names.js';
import { clientEventProblem } from '../domain/reserved-events.js';
import {
  type HttpApiOutcome,
  type HttpApiRequest,
  MachineCodeError,
  type RemoteVersion,
  SandboxCrashedError,
  SandboxDisposedError,
  SandboxHeldError,
  SandboxMemoryError,
  SandboxMovedError,
  SandboxTimeoutError,
} from '../sandbox/index.js';
import type { InstanceView } from '../store/instance-reads.js';
import type { CreateRequest } from './instance-runtime.js';
import type { InstanceState } from './instance-writes.js';
import type { LogSink } from './log-sink.js';
import { TokenBuckets } from './rate-limit.js';
import type { RuntimeSettings } from './runtime-settings.js';
import type { SandboxPool } from './sandbox-pool.js';

interface HttpApiRunnerDeps {
  /** The instance runtime's public create, send and head (instance-runtime.ts). */
  runtime: {
    /** The committed head, from the instance's owner (read-your-writes). */
    head(orgId: string, machine: string, name: string): Promise<InstanceView | undefined>;
    create(request: CreateRequest): Promise<InstanceState>;
    send(orgId: string, machine: string, name: string, event: MachineEvent, authContext: JsonObject): Promise<InstanceState>;
  };
  sandboxes: Pick<SandboxPool, 'get'>;
  catalog: {
    getOrg(orgId: string): unknown;
    getMachine(orgId: string, slug: string): { currentVersionId?: string } | undefined;
  };
  logs: Pick<LogSink, 'service'>;
  settings: Pick<RuntimeSettings, 'settleBudgetMs' | 'httpApiRequestsPerSecond'>;
}

interface HttpApiCall {
  orgId: string;
  machine: string;
  slug: string;
  request: HttpApiRequest;
}

/** The HTTP answer, ready to write: `body` is the text to send (none when absent). */
interface HttpApiAnswer {
  status: number;
  headers: Record<string, string>;
  contentType: string;
  body?: string;
}

/** What a handler must return (wire-protocol §3.14). */
interface HandlerResponse {
  machineInstanceName: string;
  event: MachineEvent;
  authContext: JsonObject;
  initialContext?: JsonObject;
}

/** When a responseMapper throws or answers something unusable (wire-protocol §3.14, from State Backed's docs). */
const FALLBACK: HttpApiAnswer = { status: 200, headers: {}, contentType: 'application/json', body: '{"ok":true}' };

/** Headers that frame the message: the server writes them; a mapper's would corrupt the answer. */
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer']);
/** Headers the node (and uWS under it) writes on every answer: a mapper's would make a second one. */
const NODE_HEADERS = new Set(['x-request-id', 'date', 'uwebsockets']);
/** Bounds on a mapper's headers: clients refuse answers whose head is much larger (undici's is 16 KiB by default). */
const MAX_MAPPER_HEADERS = 100;
const MAX_MAPPER_HEADER_CHARS = 8 * 1024;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Visible characters, spaces and tabs: no CR, LF or NUL (a header value must not end the header). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\uffff]*$/;
/** Statuses that carry no body. */
const BODYLESS = new Set([204, 205, 304]);

/** How many times a call is run again because its sandbox worker was replaced or its isolate reloaded under it. */
const MAX_MOVES = 3;

export class HttpApiRunner {
  private readonly buckets: TokenBuckets;

  constructor(private readonly deps: HttpApiRunnerDeps) {
    const perSecond = deps.settings.httpApiRequestsPerSecond;
    this.buckets = new TokenBuckets(perSecond, perSecond * 2);
  }

  async run(call: HttpApiCall): Promise<HttpApiAnswer> {
    const { orgId, machine, slug } = call;
    // Checked before the rate limit, so that made-up org ids do not each get a bucket.
    if (!isPrettyId(orgId, 'org') || this.deps.catalog.getOrg(orgId) === undefined) throw notFound(`org ${clipped(orgId)} does not exist`);
    if (!this.buckets.take(orgId)) {
      const perSecond = this.deps.settings.httpApiRequestsPerSecond;
      throw rateLimited(
        `this org's http APIs take at most ${perSecond} requests a second (${perSecond * 2} in a burst; --http-api-requests-per-second): retry later`,
      );
    }
    const record = this.deps.catalog.getMachine(orgId, machine);
    if (!record) throw notFound(`machine ${machine} does not exist`);
    const versionId = record.currentVersionId;
    if (!versionId) throw notFound(`machine ${machine} has no current version, so it has no http APIs`);
    const deadlineMs = this.deps.settings.settleBudgetMs;

    const handled = await this.inSandbox(orgId, machine, versionId, (version) => version.httpApiHandler(slug, call.request, deadlineMs));
    if (handled.kind === 'missing') throw notFound(`machine ${machine} has no http API ${clipped(slug)}: ${handled.message}`);
    if (handled.kind === 'threw') throw machineCodeFailed(`httpApiMapper.${clipped(slug)}.handler failed: ${handled.message}`);
    const { machineInstanceName: name, event, authContext, initialContext } = handlerResponse(handled.value, slug);

    if (!(await this.deps.runtime.head(orgId, machine, name))) {
      if (initialContext === undefined) {
        throw notFound(
          `instance ${name} of machine ${machine} does not exist, and the http API's handler gave no initialContext to create it with`,
        );
      }
      try {
        await this.deps.runtime.create({ orgId, machine, name, versionId, context: initialContext, authContext });
      } catch (error) {
        // 409: created meanwhile by another request; send to it.
        if (!(error instanceof ServiceError && error.status === 409)) throw error;
      }
    }
    const head = await this.deps.runtime.send(orgId, machine, name, event, authContext);

    const settled = { machineInstanceName: name, state: head.state, context: head.context, done: head.done, event };
    let mapped: HttpApiOutcome;
    try {
      mapped = await this.inSandbox(orgId, machine, versionId, (version) => version.httpApiResponse(slug, settled, deadlineMs));
    } catch (error) {
      // The event was applied and committed: the caller learns that much.
      this.fellBack(orgId, machine, name, slug, versionId, error instanceof Error ? error.message : String(error));
      return FALLBACK;
    }
    if (mapped.kind !== 'returned') {
      this.fellBack(orgId, machine, name, slug, versionId, mapped.message);
      return FALLBACK;
    }
    const answer = httpAnswer(mapped.value);
    if (typeof answer === 'string') {
      this.fellBack(orgId, machine, name, slug, versionId, answer);
      return FALLBACK;
    }
    return answer;
  }

  /** Told in the machine's logs: the HTTP caller sees only {"ok":true}. */
  private fellBack(orgId: string, machine: string, name: string, slug: string, versionId: string, why: string): void {
    this.deps.logs.service(
      orgId,
      machine,
      name,
      'warn',
      `httpApiMapper.${slug}.responseMapper failed, so the http API answered 200 {"ok":true}: ${why}`,
      { httpApi: slug },
      versionId,
    );
  }

  /**
   * Runs a call into the version's isolate, again (up to MAX_MOVES times) when its worker was replaced
   * or its isolate reloaded under it (nothing ran then); the sandbox's failures become request errors.
   */
  private async inSandbox(
    orgId: string,
    machine: string,
    versionId: string,
    run: (version: RemoteVersion) => Promise<HttpApiOutcome>,
  ): Promise<HttpApiOutcome> {
    let heldWorker = 0;
    for (let moves = 1; ; moves++) {
      try {
        return await run(await this.deps.sandboxes.get(orgId, machine, versionId));
      } catch (error) {
        // Its own machine code held the worker past the stall limit before it was done: once more (in
        // the quarantine worker by then), and a 400 when that holds it too, as for an instance's event.
        if (error instanceof SandboxDisposedError && error.ownStall && heldWorker++ > 0)
          throw machineCodeFailed(new SandboxHeldError(error.ownStall).message);
        const moved = error instanceof SandboxMovedError || error instanceof SandboxDisposedError;
        if (moved && moves < MAX_MOVES) continue;
        throw asRequestError(error);
      }
    }
  }
}

const asRequestError = (error: unknown): unknown => {
  if (error instanceof SandboxCrashedError) return error.killedFromOutside ? unavailable(error.message) : machineCodeFailed(error.message);
  if (error instanceof SandboxTimeoutError || error instanceof SandboxMemoryError) return machineCodeFailed(error.message);
  if (error instanceof MachineCodeError) return machineCodeFailed(`machine code threw: ${error.message}`);
  return error;
};

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The handler's answer, checked (400 machine-code-error when it is not one). */
const handlerResponse = (value: unknown, slug: string): HandlerResponse => {
  const invalid = (why: string) => machineCodeFailed(`httpApiMapper.${clipped(slug)}.handler returned an invalid response: ${why}`);
  if (!isObject(value)) throw invalid('it must return an object { machineInstanceName, event, authContext, initialContext? }');
  const { machineInstanceName, authContext, initialContext } = value;
  if (!isSlug(machineInstanceName)) throw invalid('machineInstanceName must be 1 to 128 characters of A-Z, a-z, 0-9, _ and -');
  const raw = value.event;
  const event = typeof raw === 'string' ? { type: raw } : raw;
  if (!isObject(event) || typeof event.type !== 'string' || event.type === '')
    throw invalid('event must be a string or an object with a string type');
  // Handlers often pass on what their caller sent: the runtime's own types are refused as from any client.
  const problem = clientEventProblem(event as MachineEvent);
  if (problem !== undefined) throw invalid(problem);
  if (!isObject(authContext)) throw invalid('authContext must be an object');
  if (initialContext !== undefined && initialContext !== null && !isObject(initialContext))
    throw invalid('initialContext must be an object when given');
  return {
    machineInstanceName,
    event: event as MachineEvent,
    authContext,
    ...(isObject(initialContext) ? { initialContext } : {}),
  };
};

/** The responseMapper's answer as HTTP, or why it cannot be one. */
const httpAnswer = (value: unknown): HttpApiAnswer | string => {
  if (!isObject(value)) return 'it must return an object { statusCode, headers, body }';
  const { statusCode, headers, body } = value;
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 200 || statusCode > 599)
    return 'statusCode must be an integer from 200 to 599';
  if (headers !== undefined && headers !== null && !isObject(headers)) return 'headers must be an object of strings';
  const out: Record<string, string> = {};
  let contentType: string | undefined;
  const entries = Object.entries(headers ?? {});
  if (entries.length > MAX_MAPPER_HEADERS) return `at most ${MAX_MAPPER_HEADERS} headers (it gave ${entries.length})`;
  for (const [rawName, rawValue] of entries) {
    const name = rawName.toLowerCase();
    const text = typeof rawValue === 'number' ? String(rawValue) : rawValue;
    if (!HEADER_NAME.test(name)) return `${clipped(JSON.stringify(rawName))} is not a valid header name`;
    if (typeof text !== 'string' || !HEADER_VALUE.test(text)) return `header ${name} must be a string without line breaks`;
    if (name.length + text.length > MAX_MAPPER_HEADER_CHARS)
      return `header ${clipped(name)} is longer than ${MAX_MAPPER_HEADER_CHARS} characters`;
    if (FRAMING_HEADERS.has(name) || NODE_HEADERS.has(name)) continue;
    if (name === 'content-type') contentType = text;
    else out[name] = text;
  }
  if (BODYLESS.has(statusCode) || body === undefined || body === null)
    return { status: statusCode, headers: out, contentType: contentType ?? 'application/json' };
  if (typeof body === 'string') return { status: statusCode, headers: out, contentType: contentType ?? 'text/plain; charset=utf-8', body };
  return { status: statusCode, headers: out, contentType: contentType ?? 'application/json', body: JSON.stringify(body) };
};
