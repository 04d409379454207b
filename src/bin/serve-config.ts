import { parseArgs } from 'node:util';
import { limits } from '../domain/limits.js';
import { parseAllowList } from '../sandbox/index.js';
import type { CommitLog } from '../store/lmdb/lmdb-instance-store.js';

export interface ServeConfig {
  host: string;
  port: number;
  dataDir: string;
  commitLog: CommitLog;
  publicUrl: string | undefined;
  adminKey: string | undefined;
  masterKey: string | undefined;
  billingUrl: string | undefined;
  pageSize: number;
  maxBodyBytes: number;
  drainTimeoutMs: number;
  settleTimeoutMs: number;
  isolateMemoryMb: number;
  liveActorMemoryMb: number;
  cpuLimitMs: number;
  sandboxStallMs: number;
  /** Where machine code runs: a worker process of the node's (process), or the node's own process (inline). */
  sandbox: SandboxMode;
  quarantineReleaseMs: number;
  maxLiveActors: number;
  pureSteps: boolean;
  /** Realtime subscriptions one websocket may hold at once. */
  rtMaxSubscriptions: number;
  rtMaxNodeSubscriptions: number;
  rtMaxSockets: number;
  rtUnsubscribedCloseSeconds: number;
  idleSeconds: number;
  timerRetryMs: number;
  madeInstancesPerSecond: number;
  httpApiRequestsPerSecond: number;
  /** POST /tokens takes no credential: exchanges a second per org, and per client address (bursts twice as many). */
  tokenExchangesPerSecond: number;
  tokenExchangesPerAddress: number;
  logRetentionDays: number;
  /** Hosts machine code's fetch may reach despite the private-address checks (`host`, `host:port`). */
  fetchAllow: string[];
  fetchTimeoutMs: number;
  fetchMaxBytes: number;
  /** How long a provisional machine version may wait for its upload and finalization (hidden: STATEHOLD_UPLOAD_TTL_SECONDS). */
  uploadTtlSeconds: number;
  /** How long commits acknowledged from the write-ahead log wait for LMDB (hidden: STATEHOLD_WAL_APPLY_DELAY_MS). */
  walApplyDelayMs: number | undefined;
  /** More Node/V8 flags for the sandbox worker processes (hidden: STATEHOLD_SANDBOX_NODE_ARGS). */
  sandboxNodeArgs: string[];
  /** GET /metrics answers without a credential. */
  metricsPublic: boolean;
  /** Log lines as text (`statehold info: ...`) or as one JSON object each. */
  logFormat: LogFormat;
  /** How often long start-up work (a write-ahead log's replay, a cluster's catch-up) says how far it is (hidden: STATEHOLD_PROGRESS_EVERY_MS). */
  progressEveryMs: number;
}

export type LogFormat = 'text' | 'json';
export type SandboxMode = 'process' | 'inline';

/** Flag name, environment variable, default and help line of each setting: one table, used for parsing and for --help. */
export const serveSettings = [
  { flag: 'port', env: 'STATEHOLD_PORT', fallback: '8787', help: 'TCP port to listen on (0 picks a free one)' },
  { flag: 'host', env: 'STATEHOLD_HOST', fallback: '127.0.0.1', help: 'address to listen on' },
  { flag: 'data-dir', env: 'STATEHOLD_DATA_DIR', fallback: './data', help: 'where the LMDB files and the master key live' },
  {
    flag: 'commit-log',
    env: 'STATEHOLD_COMMIT_LOG',
    fallback: 'wal',
    help: "how an event is made durable before it is acknowledged: wal (one write to a write-ahead log in the data dir, shared by the events committed together, LMDB written within 20 ms behind it) or lmdb (LMDB's own synced commit)",
  },
  {
    flag: 'public-url',
    env: 'STATEHOLD_PUBLIC_URL',
    fallback: undefined,
    help: 'the URL clients use, e.g. https://statehold.example.com (default http://<host>:<port>; unset, upload URLs name the host a request came to); tokens with aud "<public-url>/" are accepted',
  },
  {
    flag: 'admin-key',
    env: 'STATEHOLD_ADMIN_KEY',
    fallback: undefined,
    help: 'the operator credential (Authorization: Bearer <key>); generated and printed once on first start when not given',
  },
  {
    flag: 'billing-url',
    env: 'STATEHOLD_BILLING_URL',
    fallback: undefined,
    help: 'the link GET /billing returns (default <public-url>/billing-portal)',
  },
  { flag: 'page-size', env: 'STATEHOLD_PAGE_SIZE', fallback: String(limits.defaultPageSize), help: 'items per page of list endpoints' },
  {
    flag: 'max-body-bytes',
    env: 'STATEHOLD_MAX_BODY_BYTES',
    fallback: String(limits.defaultMaxBodyBytes),
    help: 'largest request body accepted (413 above it)',
  },
  {
    flag: 'settle-timeout-ms',
    env: 'STATEHOLD_SETTLE_TIMEOUT_MS',
    fallback: '10000',
    help: 'how long creating an instance or sending an event waits for the machine to settle',
  },
  {
    flag: 'isolate-memory-mb',
    env: 'STATEHOLD_ISOLATE_MEMORY_MB',
    fallback: '128',
    help: "memory machine code may use in one call into its version's isolate, beyond what the live instances hold there (more fails the call: 400 machine-code-error)",
  },
  {
    flag: 'live-actor-memory-mb',
    env: 'STATEHOLD_LIVE_ACTOR_MEMORY_MB',
    fallback: '128',
    help: "memory a machine version's live instances may hold in its isolate (≈ 7 KB each for a small machine); beyond, the least recently used are evicted and reload from their snapshot on demand. The isolate's heap limit is this plus --isolate-memory-mb",
  },
  {
    flag: 'cpu-limit-ms',
    env: 'STATEHOLD_CPU_LIMIT_MS',
    fallback: '1000',
    help: 'time one call into machine code may run (isolated-vm counts it on the clock: on a loaded host, waits for a core count too)',
  },
  {
    flag: 'sandbox',
    env: 'STATEHOLD_SANDBOX',
    fallback: 'process',
    help: "where machine code's isolates run: process (a worker process of the node's: a V8 crash in machine code costs a worker restart, and a call that holds it past --sandbox-stall-ms moves its org to the quarantine worker) or inline (the node's own process: no crossing between processes per call, but a V8 crash in machine code takes the node down and a spinning call holds the node until it returns or --cpu-limit-ms ends it, and only then is its org moved aside; for code you trust). Uploads are checked, and quarantined orgs run, in worker processes either way",
  },
  {
    flag: 'sandbox-stall-ms',
    env: 'STATEHOLD_SANDBOX_STALL_MS',
    fallback: '100',
    help: 'a call into machine code that holds the sandbox worker for this much CPU time moves its org to the quarantine worker and every other request to a fresh worker (0: never)',
  },
  {
    flag: 'quarantine-release-ms',
    env: 'STATEHOLD_QUARANTINE_RELEASE_MS',
    fallback: '600000',
    help: 'an org moved to the quarantine worker for holding the sandbox worker returns to the main worker after this long without holding a worker again (0: never); an org whose code crashed a worker stays until the node restarts',
  },
  {
    flag: 'max-live-actors',
    env: 'STATEHOLD_MAX_LIVE_ACTORS',
    fallback: '20000',
    help: 'instances kept live in memory; idle ones beyond it are evicted and reloaded on demand',
  },
  {
    flag: 'pure-steps',
    env: 'STATEHOLD_PURE_STEPS',
    fallback: 'on',
    help: "on: instances of a machine that can leave nothing running but delayed events to itself (no invoke, activity, or send to another actor or without a fixed delay) rest between events as their state and timers alone, stepped by xstate's pure transition (≈ 2–4 KB each instead of ≈ 9–11 KB with an interpreter); off: every live instance keeps an interpreter",
  },
  {
    flag: 'rt-max-subscriptions',
    env: 'STATEHOLD_RT_MAX_SUBSCRIPTIONS',
    fallback: '1000',
    help: 'subscriptions one /rt websocket may hold at once (duplicates count); one more gets an in-band 429 error',
  },
  {
    flag: 'rt-max-node-subscriptions',
    env: 'STATEHOLD_RT_MAX_NODE_SUBSCRIPTIONS',
    fallback: '100000',
    help: "subscriptions all of the node's /rt websockets may hold at once; one more gets an in-band 503 error",
  },
  {
    flag: 'rt-max-sockets',
    env: 'STATEHOLD_RT_MAX_SOCKETS',
    fallback: '10000',
    help: '/rt websockets open at once; one more is answered 503 on each subscribe and closed (1013) after 10 s, and beyond half as many more the upgrade itself gets 503',
  },
  {
    flag: 'rt-unsubscribed-close-seconds',
    env: 'STATEHOLD_RT_UNSUBSCRIBED_CLOSE_SECONDS',
    fallback: '60',
    help: 'an /rt websocket that holds no subscription for this long is closed (1000)',
  },
  {
    flag: 'idle-seconds',
    env: 'STATEHOLD_IDLE_SECONDS',
    fallback: '600',
    help: 'live instances no request took for this long are evicted (reloaded on demand), and the isolates of versions no live instance is on are freed',
  },
  {
    flag: 'timer-retry-ms',
    env: 'STATEHOLD_TIMER_RETRY_MS',
    fallback: '30000',
    help: 'wait before retrying a delayed event whose delivery failed (5 retries, then it is dropped)',
  },
  {
    flag: 'made-instances-per-second',
    env: 'STATEHOLD_MADE_INSTANCES_PER_SECOND',
    fallback: '50',
    help: 'instances machine code may make per org per second (spawns, sends creating their target), ten times as many in a burst; beyond, they are retried later',
  },
  {
    flag: 'http-api-requests-per-second',
    env: 'STATEHOLD_HTTP_API_REQUESTS_PER_SECOND',
    fallback: '100',
    help: "requests to machines' http APIs (/http-api/...) each org may make per second, twice as many in a burst; beyond, 429",
  },
  {
    flag: 'token-exchanges-per-second',
    env: 'STATEHOLD_TOKEN_EXCHANGES_PER_SECOND',
    fallback: '100',
    help: 'token exchanges (POST /tokens, which takes no credential) each org may have per second, twice as many in a burst; beyond, 429',
  },
  {
    flag: 'token-exchanges-per-address',
    env: 'STATEHOLD_TOKEN_EXCHANGES_PER_ADDRESS',
    fallback: '10',
    help: 'token exchanges one client address may make per second, twice as many in a burst; beyond, 429',
  },
  {
    flag: 'log-retention-days',
    env: 'STATEHOLD_LOG_RETENTION_DAYS',
    fallback: '7',
    help: 'machine logs older than this are deleted (checked at start and hourly)',
  },
  {
    flag: 'fetch-allow',
    env: 'STATEHOLD_FETCH_ALLOW',
    fallback: undefined,
    help: "comma-separated hosts machine code's fetch may reach although they are loopback/private (host, host:port, 127.0.0.1:8080, [::1]:8080); default none",
  },
  {
    flag: 'fetch-timeout-ms',
    env: 'STATEHOLD_FETCH_TIMEOUT_MS',
    fallback: '10000',
    help: 'time limit of one fetch by machine code (DNS, connect, redirects, body)',
  },
  {
    flag: 'fetch-max-bytes',
    env: 'STATEHOLD_FETCH_MAX_BYTES',
    fallback: String(5 * 1024 * 1024),
    help: 'largest response body a fetch by machine code may read',
  },
  {
    flag: 'log-format',
    env: 'STATEHOLD_LOG_FORMAT',
    fallback: 'text',
    help: 'text (statehold <level>: message key=value ...) or json (one object a line: time, level, message, requestId, org, machine, instance where known)',
  },
  {
    flag: 'drain-timeout-ms',
    env: 'STATEHOLD_DRAIN_TIMEOUT_MS',
    fallback: '30000',
    help: 'on SIGTERM, how long to wait for requests in flight',
  },
] as const;

/** Flags that take no value (given: on); their environment variable takes on/off, true/false or 1/0. */
export const serveSwitches = [
  {
    flag: 'metrics-public',
    env: 'STATEHOLD_METRICS_PUBLIC',
    help: 'GET /metrics answers without a credential (else it needs the operator key): for a scraper on a trusted network',
  },
] as const;

/** Only from the environment: a secret on the command line shows in `ps`. */
export const environmentOnly = [
  {
    env: 'STATEHOLD_MASTER_KEY',
    help: '32 bytes (base64 or hex) sealing key secrets at rest; default: <data-dir>/master.key, created on first start',
  },
] as const;

export class ConfigError extends Error {}

/** Flags win over environment variables, which win over defaults. */
export const parseServeConfig = (argv: string[], env: NodeJS.ProcessEnv): ServeConfig => {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...Object.fromEntries(serveSettings.map((s) => [s.flag, { type: 'string' as const }])),
      ...Object.fromEntries(serveSwitches.map((s) => [s.flag, { type: 'boolean' as const }])),
    },
    strict: true,
    allowPositionals: false,
  });
  const pick = (flag: (typeof serveSettings)[number]['flag']): string | undefined => {
    const setting = serveSettings.find((s) => s.flag === flag);
    const fromFlag = values[flag];
    if (typeof fromFlag === 'string') return fromFlag;
    const fromEnv = setting ? env[setting.env] : undefined;
    return fromEnv !== undefined && fromEnv !== '' ? fromEnv : setting?.fallback;
  };
  const integer = (flag: (typeof serveSettings)[number]['flag'], min: number, max: number): number => {
    const text = pick(flag) ?? '';
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max)
      throw new ConfigError(`--${flag} must be an integer from ${min} to ${max}, not "${text}"`);
    return value;
  };
  const publicUrl = pick('public-url');
  if (publicUrl !== undefined && !/^https?:\/\/[^/]+/.test(publicUrl))
    throw new ConfigError(`--public-url must be an http(s) URL, not "${publicUrl}"`);
  return {
    host: pick('host') ?? '127.0.0.1',
    port: integer('port', 0, 65535),
    dataDir: pick('data-dir') ?? './data',
    commitLog: commitLog(pick('commit-log')),
    publicUrl: publicUrl?.replace(/\/+$/, ''),
    adminKey: adminKey(pick('admin-key')),
    masterKey: env.STATEHOLD_MASTER_KEY || undefined,
    billingUrl: pick('billing-url'),
    pageSize: integer('page-size', 1, 1000),
    maxBodyBytes: integer('max-body-bytes', 1024, 1024 * 1024 * 1024),
    drainTimeoutMs: integer('drain-timeout-ms', 0, 3_600_000),
    settleTimeoutMs: integer('settle-timeout-ms', 0, 600_000),
    isolateMemoryMb: integer('isolate-memory-mb', 16, 4096),
    liveActorMemoryMb: integer('live-actor-memory-mb', 1, 16_384),
    cpuLimitMs: integer('cpu-limit-ms', 10, 600_000),
    sandboxStallMs: integer('sandbox-stall-ms', 0, 600_000),
    sandbox: sandboxMode(pick('sandbox')),
    quarantineReleaseMs: integer('quarantine-release-ms', 0, 30 * 86_400_000),
    maxLiveActors: integer('max-live-actors', 1, 10_000_000),
    pureSteps: onOff('pure-steps', pick('pure-steps')),
    rtMaxSubscriptions: integer('rt-max-subscriptions', 1, 1_000_000),
    rtMaxNodeSubscriptions: integer('rt-max-node-subscriptions', 1, 100_000_000),
    rtMaxSockets: integer('rt-max-sockets', 1, 10_000_000),
    rtUnsubscribedCloseSeconds: integer('rt-unsubscribed-close-seconds', 1, 7 * 86_400),
    idleSeconds: integer('idle-seconds', 1, 7 * 86_400),
    timerRetryMs: integer('timer-retry-ms', 1, 3_600_000),
    madeInstancesPerSecond: integer('made-instances-per-second', 1, 1_000_000),
    httpApiRequestsPerSecond: integer('http-api-requests-per-second', 1, 1_000_000),
    tokenExchangesPerSecond: integer('token-exchanges-per-second', 1, 1_000_000),
    tokenExchangesPerAddress: integer('token-exchanges-per-address', 1, 1_000_000),
    logRetentionDays: integer('log-retention-days', 1, 36_500),
    fetchAllow: fetchAllow(pick('fetch-allow')),
    fetchTimeoutMs: integer('fetch-timeout-ms', 1, 600_000),
    fetchMaxBytes: integer('fetch-max-bytes', 1, 1024 * 1024 * 1024),
    uploadTtlSeconds: uploadTtlSeconds(env.STATEHOLD_UPLOAD_TTL_SECONDS),
    walApplyDelayMs: walApplyDelayMs(env.STATEHOLD_WAL_APPLY_DELAY_MS),
    sandboxNodeArgs: sandboxNodeArgs(env.STATEHOLD_SANDBOX_NODE_ARGS),
    metricsPublic: values['metrics-public'] === true || switchedOn('STATEHOLD_METRICS_PUBLIC', env.STATEHOLD_METRICS_PUBLIC),
    logFormat: logFormat(pick('log-format')),
    progressEveryMs: progressEveryMs(env.STATEHOLD_PROGRESS_EVERY_MS),
  };
};

const switchedOn = (name: string, text: string | undefined): boolean => {
  if (text === undefined || text === '' || text === 'off' || text === 'false' || text === '0') return false;
  if (text === 'on' || text === 'true' || text === '1') return true;
  throw new ConfigError(`${name} must be on or off, not "${text}"`);
};

const logFormat = (text: string | undefined): LogFormat => {
  if (text === 'text' || text === 'json') return text;
  throw new ConfigError(`--log-format must be text or json, not "${text}"`);
};

/** Not in --help: tests shorten it to see a progress line on a small start (0: at every step); 2 s otherwise. */
const progressEveryMs = (text: string | undefined): number => {
  if (text === undefined || text === '') return 2_000;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0 || value > 3_600_000)
    throw new ConfigError(`STATEHOLD_PROGRESS_EVERY_MS must be an integer from 0 to 3600000, not "${text}"`);
  return value;
};

/**
 * The operator key is sent as `Authorization: Bearer <key>`: it must be one bearer token (RFC 6750's
 * characters), and without a dot, since a bearer with a dot is taken for a JWT. (Not echoed: a secret.)
 */
const adminKey = (text: string | undefined): string | undefined => {
  if (text === undefined) return undefined;
  if (!/^[A-Za-z0-9_~+/=-]{1,512}$/.test(text)) {
    throw new ConfigError(
      '--admin-key may hold only letters, digits and - _ ~ + / = (at most 512; no dot: a bearer token with a dot is read as a JWT)',
    );
  }
  return text;
};

const sandboxMode = (text: string | undefined): SandboxMode => {
  if (text === 'process' || text === 'inline') return text;
  throw new ConfigError(`--sandbox must be process or inline, not "${text}"`);
};

const commitLog = (text: string | undefined): CommitLog => {
  if (text === 'wal' || text === 'lmdb') return text;
  throw new ConfigError(`--commit-log must be wal or lmdb, not "${text}"`);
};

const onOff = (flag: string, text: string | undefined): boolean => {
  if (text === 'on') return true;
  if (text === 'off') return false;
  throw new ConfigError(`--${flag} must be on or off, not "${text}"`);
};

const fetchAllow = (text: string | undefined): string[] => {
  const entries = (text ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  try {
    parseAllowList(entries);
  } catch (e) {
    throw new ConfigError(`--fetch-allow: ${(e as Error).message}`);
  }
  return entries;
};

/** Not in --help: tests shorten it to see expiry; one hour otherwise. */
const uploadTtlSeconds = (text: string | undefined): number => {
  if (text === undefined || text === '') return 3600;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 7 * 24 * 3600)
    throw new ConfigError(`STATEHOLD_UPLOAD_TTL_SECONDS must be an integer from 1 to 604800, not "${text}"`);
  return value;
};

/**
 * Not in --help: flags for the sandbox workers' Node (e.g. `--perf-basic-prof` or `--trace-gc` to see
 * where their time goes, bench/README.md), space-separated; each must be a flag.
 */
const sandboxNodeArgs = (text: string | undefined): string[] => {
  const args = (text ?? '').split(/\s+/).filter((arg) => arg !== '');
  const notFlag = args.find((arg) => !/^--[a-z0-9][a-z0-9_-]*(=\S+)?$/.test(arg));
  if (notFlag !== undefined)
    throw new ConfigError(`STATEHOLD_SANDBOX_NODE_ARGS takes Node flags (--name or --name=value) separated by spaces, not "${notFlag}"`);
  return args;
};

/** Not in --help: tests hold LMDB's writes back for minutes, to see the log applied after a crash. */
const walApplyDelayMs = (text: string | undefined): number | undefined => {
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0 || value > 3_600_000)
    throw new ConfigError(`STATEHOLD_WAL_APPLY_DELAY_MS must be an integer from 0 to 3600000, not "${text}"`);
  return value;
};
