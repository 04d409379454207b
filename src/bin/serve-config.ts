import { parseArgs } from 'node:util';
import { limits } from '../domain/limits.js';

export interface ServeConfig {
  host: string;
  port: number;
  dataDir: string;
  publicUrl: string | undefined;
  adminKey: string | undefined;
  masterKey: string | undefined;
  billingUrl: string | undefined;
  pageSize: number;
  maxBodyBytes: number;
  drainTimeoutMs: number;
}

/** Flag name, environment variable, default and help line of each setting: one table, used for parsing and for --help. */
export const serveSettings = [
  { flag: 'port', env: 'STATEHOLD_PORT', fallback: '8787', help: 'TCP port to listen on (0 picks a free one)' },
  { flag: 'host', env: 'STATEHOLD_HOST', fallback: '127.0.0.1', help: 'address to listen on' },
  { flag: 'data-dir', env: 'STATEHOLD_DATA_DIR', fallback: './data', help: 'where the LMDB files and the master key live' },
  { flag: 'public-url', env: 'STATEHOLD_PUBLIC_URL', fallback: undefined, help: 'the URL clients use, e.g. https://statehold.example.com (default http://<host>:<port>); tokens with aud "<public-url>/" are accepted' },
  { flag: 'admin-key', env: 'STATEHOLD_ADMIN_KEY', fallback: undefined, help: 'the operator credential (Authorization: Bearer <key>); generated and printed once on first start when not given' },
  { flag: 'billing-url', env: 'STATEHOLD_BILLING_URL', fallback: undefined, help: 'the link GET /billing returns (default <public-url>/billing-portal)' },
  { flag: 'page-size', env: 'STATEHOLD_PAGE_SIZE', fallback: String(limits.defaultPageSize), help: 'items per page of list endpoints' },
  { flag: 'max-body-bytes', env: 'STATEHOLD_MAX_BODY_BYTES', fallback: String(limits.defaultMaxBodyBytes), help: 'largest request body accepted (413 above it)' },
  { flag: 'drain-timeout-ms', env: 'STATEHOLD_DRAIN_TIMEOUT_MS', fallback: '30000', help: 'on SIGTERM, how long to wait for requests in flight' },
] as const;

/** Only from the environment: a secret on the command line shows in `ps`. */
export const environmentOnly = [{ env: 'STATEHOLD_MASTER_KEY', help: '32 bytes (base64 or hex) sealing key secrets at rest; default: <data-dir>/master.key, created on first start' }] as const;

export class ConfigError extends Error {}

/** Flags win over environment variables, which win over defaults. */
export const parseServeConfig = (argv: string[], env: NodeJS.ProcessEnv): ServeConfig => {
  const { values } = parseArgs({
    args: argv,
    options: Object.fromEntries(serveSettings.map((s) => [s.flag, { type: 'string' as const }])),
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
    if (!Number.isInteger(value) || value < min || value > max) throw new ConfigError(`--${flag} must be an integer from ${min} to ${max}, not "${text}"`);
    return value;
  };
  const publicUrl = pick('public-url');
  if (publicUrl !== undefined && !/^https?:\/\/[^/]+/.test(publicUrl)) throw new ConfigError(`--public-url must be an http(s) URL, not "${publicUrl}"`);
  return {
    host: pick('host') ?? '127.0.0.1',
    port: integer('port', 0, 65535),
    dataDir: pick('data-dir') ?? './data',
    publicUrl: publicUrl?.replace(/\/+$/, ''),
    adminKey: pick('admin-key'),
    masterKey: env.STATEHOLD_MASTER_KEY || undefined,
    billingUrl: pick('billing-url'),
    pageSize: integer('page-size', 1, 1000),
    maxBodyBytes: integer('max-body-bytes', 1024, 1024 * 1024 * 1024),
    drainTimeoutMs: integer('drain-timeout-ms', 0, 3_600_000),
  };
};
