// Only modules that load on any Node.js are imported here: the nodes (and the write-ahead log's
// zlib.crc32 with them) are imported by serve and node, after main checked the version (node-version.ts).
import { DataDirInUseError } from '../store/lmdb/data-dir-lock.js';
import { consoleAnnouncer, consoleLogger } from './console-logger.js';
import type { RunningNode } from './embedded-node.js';
import { clusterSettings, parseNodeConfig } from './node-config.js';
import type { Logger } from '../domain/logger.js';
import { nodeVersionProblem } from './node-version.js';
import { ConfigError, environmentOnly, parseServeConfig, serveSettings, serveSwitches } from './serve-config.js';
import { keepUpOnStorageFailures } from './storage-failures.js';

const usage = (): string => {
  const settings = serveSettings
    .map((s) => `  --${s.flag.padEnd(18)} ${s.env.padEnd(28)} ${s.help}${s.fallback !== undefined ? ` (default ${s.fallback})` : ''}`)
    .join('\n');
  const clusterOptions = clusterSettings
    .map((s) => `  --${s.flag.padEnd(18)} ${s.env.padEnd(28)} ${s.help}${s.fallback !== undefined ? ` (default ${s.fallback})` : ''}`)
    .join('\n');
  const switches = serveSwitches.map((s) => `  --${s.flag.padEnd(18)} ${s.env.padEnd(28)} ${s.help}`).join('\n');
  const envOnly = environmentOnly.map((s) => `  ${''.padEnd(20)} ${s.env.padEnd(28)} ${s.help}`).join('\n');
  return `statehold: runs XState machines as durable actors behind the State Backed API

Usage:
  statehold serve [options]    start an embedded node (one process, LMDB storage)
  statehold node [options]     start a cluster node: serve's options and the cluster's below
                               (operating a cluster, its fault tests and limits: cluster/README.md)
  statehold smply-login --url U (--key OPERATOR_KEY | --key-id sbk_... --key SECRET) [--org org_...]
                               write ~/.smply/credentials (and default-org) so the smply CLI works
                               against the node at U: smply -u U machines list (README)
  statehold help               show this text

Options of serve (flag, environment variable; flags win over the environment):
${settings}
${switches}
${envOnly}

Options of node, beside those of serve (which needs STATEHOLD_MASTER_KEY and --admin-key, the same on every node):
${clusterOptions}

On first start with an empty data dir the node creates a bootstrap org and, unless an admin key is
given, an operator key that it prints once. Use it as "Authorization: Bearer <key>"; with several
orgs, name one with the x-statebacked-org-id header.

GET /health answers 200 when the node is ready. SIGTERM (or SIGINT) stops accepting work, finishes
the requests in flight, flushes storage and exits 0.
`;
};

const serve = async (argv: string[]): Promise<void> => {
  const config = parseServeConfig(argv, process.env);
  const logger = consoleLogger(config.logFormat);
  const announce = consoleAnnouncer(config.logFormat);
  keepUpOnStorageFailures(logger);
  const { startEmbeddedNode } = await import('./embedded-node.js');
  const node = await startEmbeddedNode(config, logger, announce);
  announce(`listening on ${node.url} (data in ${config.dataDir})`);
  stopOnSignals(node, logger);
};

/** `statehold node`: a cluster node (cluster/README.md). */
const clusterNode = async (argv: string[]): Promise<void> => {
  const config = parseNodeConfig(argv, process.env);
  const logger = consoleLogger(config.logFormat);
  const announce = consoleAnnouncer(config.logFormat);
  keepUpOnStorageFailures(logger);
  const { startClusterNode } = await import('./cluster-node.js');
  const node = await startClusterNode(config, logger, announce);
  announce(`listening on ${node.url} (node ${config.nodeId} of cluster ${config.cluster}, data in ${config.dataDir})`);
  stopOnSignals(node, logger);
};

/** `statehold smply-login`: a session file for the real smply CLI (smply-login.ts). */
const smplyLogin = async (argv: string[]): Promise<void> => {
  const { LoginCheckFailed, smplyLogin: login } = await import('./smply-login.js');
  try {
    await login(argv, process.env, (line) => process.stdout.write(`statehold: ${line}\n`));
  } catch (error) {
    if (!(error instanceof LoginCheckFailed)) throw error;
    process.stderr.write(`statehold: ${error.message}\n`);
    process.exitCode = 1;
  }
};

const stopOnSignals = (node: RunningNode, logger: Logger): void => {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`${signal} received: draining`);
    node.stop().then(
      () => {
        logger.info('stopped cleanly');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error('failed to stop cleanly', { error: String(error) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
};

const main = async (): Promise<void> => {
  const tooOld = nodeVersionProblem(process.versions.node);
  if (tooOld !== undefined) {
    process.stderr.write(`statehold: ${tooOld}\n`);
    process.exit(2);
  }
  const [command, ...rest] = process.argv.slice(2);
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(usage());
    return;
  }
  const run = command === 'serve' ? serve : command === 'node' ? clusterNode : command === 'smply-login' ? smplyLogin : undefined;
  if (run) {
    if (rest.includes('--help') || rest.includes('-h')) process.stdout.write(usage());
    else await run(rest);
    return;
  }
  process.stderr.write(`statehold: unknown command "${command}"\n\n${usage()}`);
  process.exitCode = 2;
};

/**
 * Why the node did not start, on stderr: as text (`statehold: ...`), or as a JSON line when
 * `--log-format json` was asked for (read from the command line and the environment as they are: the
 * configuration may be what failed).
 */
const failed = (message: string, code: number): never => {
  const args = process.argv.slice(2);
  const at = args.indexOf('--log-format');
  const asked = args.find((arg) => arg.startsWith('--log-format='))?.slice('--log-format='.length) ?? (at >= 0 ? args[at + 1] : undefined);
  if ((asked ?? process.env.STATEHOLD_LOG_FORMAT) === 'json') consoleLogger('json').error(message);
  else process.stderr.write(`statehold: ${message}\n`);
  process.exit(code);
};

main().catch((error: unknown) => {
  if (error instanceof ConfigError || (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))) {
    failed(error.message, 2);
  }
  if (error instanceof DataDirInUseError) failed(error.message, 1);
  failed(`failed to start: ${error instanceof Error ? error.stack : String(error)}`, 1);
});
