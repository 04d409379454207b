import { DEFAULT_PARTITIONS, MAX_PARTITIONS } from '../domain/partitions.js';
import { ConfigError, parseServeConfig, type ServeConfig } from './serve-config.js';

/** The settings of `statehold node` beyond those of `serve`. */
export interface ClusterConfig {
  /** NATS server URLs (any of the cluster's; the client finds the others). */
  nats: string[];
  nodeId: string;
  /** Names the cluster: its subjects and streams. Nodes of one cluster must agree. */
  cluster: string;
  /** JetStream replicas of the cluster's streams: 1 on one nats-server, 3 on three. */
  replicas: number;
  heartbeatMs: number;
  missedHeartbeats: number;
  /** Partitions of a cluster whose log this node makes (a log that exists keeps its own count). */
  partitions: number;
  /** Nodes besides the owner that hold each partition caught up, for a warm failover (0 or 1). */
  standbys: number;
}

export const clusterSettings = [
  { flag: 'nats', env: 'STATEHOLD_NATS', fallback: undefined, help: 'NATS server URLs, comma-separated (nats://host:4222,...); required' },
  {
    flag: 'node-id',
    env: 'STATEHOLD_NODE_ID',
    fallback: undefined,
    help: "this node's id in the cluster, [a-zA-Z0-9_-]; required, stable across restarts",
  },
  {
    flag: 'cluster',
    env: 'STATEHOLD_CLUSTER',
    fallback: 'statehold',
    help: "the cluster's name (its NATS subjects and JetStream streams); every node of a cluster uses the same",
  },
  {
    flag: 'replicas',
    env: 'STATEHOLD_REPLICAS',
    fallback: '1',
    help: "JetStream replicas of the cluster's streams: 1 (one nats-server) or 3 (three)",
  },
  { flag: 'heartbeat-ms', env: 'STATEHOLD_HEARTBEAT_MS', fallback: '250', help: 'how often a node says it is alive' },
  {
    flag: 'missed-heartbeats',
    env: 'STATEHOLD_MISSED_HEARTBEATS',
    fallback: '4',
    help: 'a node not heard from for this many beats leaves the cluster (its instances move)',
  },
  {
    flag: 'partitions',
    env: 'STATEHOLD_PARTITIONS',
    fallback: String(DEFAULT_PARTITIONS),
    help: "how many partitions instances are divided into, the units nodes own; read when the cluster's log is made, fixed after",
  },
  {
    flag: 'standbys',
    env: 'STATEHOLD_STANDBYS',
    fallback: '0',
    help: "nodes besides the owner that keep each partition caught up (0 or 1): 1 makes a failover warm and doubles the cluster's apply work",
  },
] as const;

type ClusterFlag = (typeof clusterSettings)[number]['flag'];

/** `statehold node` takes the settings of `serve` and the cluster's; flags win over the environment. */
export const parseNodeConfig = (argv: string[], env: NodeJS.ProcessEnv): ServeConfig & ClusterConfig => {
  const own = new Map<ClusterFlag, string>();
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    const setting = match ? clusterSettings.find((s) => s.flag === match[1]) : undefined;
    if (!match || !setting) {
      rest.push(arg);
      continue;
    }
    const value = match[2] ?? argv[++i];
    if (value === undefined) throw new ConfigError(`--${setting.flag} needs a value`);
    own.set(setting.flag, value);
  }
  const pick = (flag: ClusterFlag): string | undefined => {
    const setting = clusterSettings.find((s) => s.flag === flag);
    const fromEnv = setting ? env[setting.env] : undefined;
    return own.get(flag) ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : setting?.fallback);
  };
  const integer = (flag: ClusterFlag, min: number, max: number): number => {
    const text = pick(flag) ?? '';
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max)
      throw new ConfigError(`--${flag} must be an integer from ${min} to ${max}, not "${text}"`);
    return value;
  };
  const token = (flag: ClusterFlag): string => {
    const text = pick(flag);
    if (text === undefined) throw new ConfigError(`--${flag} is required for statehold node`);
    if (!/^[a-zA-Z0-9_-]{1,64}$/.test(text)) throw new ConfigError(`--${flag} must be 1 to 64 characters of [a-zA-Z0-9_-], not "${text}"`);
    return text;
  };
  const nats = (pick('nats') ?? '')
    .split(',')
    .map((url) => url.trim())
    .filter((url) => url !== '');
  if (nats.length === 0) throw new ConfigError('--nats is required for statehold node (nats://host:4222[,...])');
  for (const url of nats) if (!/^(nats|tls):\/\/[^/\s]+$/.test(url)) throw new ConfigError(`--nats takes nats:// URLs, not "${url}"`);
  const replicas = integer('replicas', 1, 5);
  if (replicas !== 1 && replicas !== 3 && replicas !== 5) throw new ConfigError('--replicas must be 1, 3 or 5');
  return {
    ...parseServeConfig(rest, env),
    nats,
    nodeId: token('node-id'),
    cluster: token('cluster'),
    replicas,
    heartbeatMs: integer('heartbeat-ms', 20, 60_000),
    missedHeartbeats: integer('missed-heartbeats', 2, 100),
    partitions: integer('partitions', 1, MAX_PARTITIONS),
    standbys: integer('standbys', 0, 1),
  };
};
