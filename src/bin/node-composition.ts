import { buildRouter } from '../api/routes/index.js';
import { type ApiContext, type ApiSettings, callerOf } from '../api/api-context.js';
import { HttpServer } from '../api/http-server.js';
import { defaultRealtimeLimits, RealtimeHub } from '../api/realtime/realtime-hub.js';
import { AdminCredential } from '../auth/admin-credential.js';
import { Authenticator } from '../auth/authenticator.js';
import { KeyRing } from '../auth/key-ring.js';
import { loadMasterKey } from '../auth/master-key.js';
import { provisionAnonymousAccess } from '../auth/anonymous-access.js';
import { JwksCache } from '../auth/jwks-cache.js';
import { SecretSealer } from '../auth/secret-sealer.js';
import { TokenExchange } from '../auth/token-exchange.js';
import { unauthorized } from '../domain/errors.js';
import { limits } from '../domain/limits.js';
import { parseAllowList } from '../sandbox/egress-policy.js';
import { UploadSigner } from '../auth/upload-signer.js';
import { newAdminKey, prettyId } from '../domain/ids.js';
import type { Logger } from '../domain/logger.js';
import { SandboxClient, type Stall } from '../sandbox/index.js';
import { InstanceRuntime } from '../runtime/instance-runtime.js';
import { HttpApiRunner } from '../runtime/http-api-runner.js';
import { LogSink } from '../runtime/log-sink.js';
import { defaultRuntimeSettings, type RuntimeSettings } from '../runtime/runtime-settings.js';
import { SandboxPool } from '../runtime/sandbox-pool.js';
import { TimerScheduler } from '../runtime/timer-scheduler.js';
import { requireScope } from '../auth/caller.js';
import { OutboxDispatcher } from '../runtime/outbox-dispatcher.js';
import { faultHook } from './fault-hooks.js';
import type { NodeMetrics } from './node-metrics.js';
import type { Catalog, NodeStore } from '../store/catalog.js';
import type { OutboxMessage } from '../store/instance-store.js';
import type { UpdateBus } from '../runtime/update-bus.js';
import type { InstanceWrites } from '../runtime/instance-writes.js';
import { LocalInstanceReads } from '../runtime/local-instance-reads.js';
import type { InstanceReads } from '../store/instance-reads.js';
import type { TimerFiring } from '../runtime/instance-runtime.js';
import type { ServeConfig } from './serve-config.js';

export interface RunningNode {
  url: string;
  port: number;
  /** Stops accepting work, finishes what is in flight (up to the drain timeout), flushes storage. */
  stop(): Promise<void>;
}

/** What differs between the embedded node and a cluster node; the rest of a node is composed alike. */
interface Deployment {
  /** The node's metrics (GET /metrics): the deployment registers its own there (a cluster's NATS state, forwarding). */
  metrics: NodeMetrics;
  storage: Pick<NodeStore, 'catalog' | 'versions' | 'instances' | 'logs'>;
  updates: UpdateBus;
  /** How the runtime is reached: writes, timer firings and messages go to each instance's owner. */
  attach(runtime: InstanceRuntime): {
    writes: InstanceWrites;
    fire: (orgId: string, machine: string, name: string) => Promise<TimerFiring | 'not-owner'>;
    deliver: (message: OutboxMessage) => Promise<void>;
    shouldDispatch?: (message: OutboxMessage) => boolean;
    /** Pending timers that reached this node's storage from another node (a cluster's followed log). */
    onReplicatedTimers?: (listener: (earliestDueAt: number) => void) => void;
    /** Outbox entries that reached this node's storage from another node's commits (a cluster's followed log). */
    onReplicatedOutbox?: (listener: () => void) => void;
    /** Instance reads from the owners; the node's own store and runtime when not given. */
    reads?: InstanceReads;
  };
  /**
   * Called once the node listens and its sandbox worker starts, with a way to load machine versions
   * into it: a cluster node loads its instances' versions, then takes its share.
   */
  ready?(preload: (versions: Array<{ orgId: string; machine: string; versionId: string }>) => Promise<void>): Promise<void>;
  /** Told at the start of a stop, before the drain: a cluster node hands its share over here. */
  leave?(): Promise<void>;
  /** Releases the storage and whatever else the deployment holds, once the runtime stopped. */
  close(): Promise<void>;
  /**
   * The bootstrap org's id when the catalog has no org: fixed in a cluster, so nodes starting together
   * make one org between them; random otherwise.
   */
  bootstrapOrgId?: string;
  /** Told the node's URL once it listens (a cluster node announces it to the others). */
  listening?(url: string): void;
  /** A cluster node's health and view (GET /health, GET /cluster). */
  cluster?: ApiContext['cluster'];
}

/**
 * A node: the operator credential, auth, the sandbox workers, the runtime, timers, the outbox, the HTTP
 * and realtime front end, over a deployment's storage and bus (design.md §6.1: nothing below bin/
 * branches on the deployment).
 */
export const composeNode = async (
  config: ServeConfig,
  logger: Logger,
  announce: (line: string) => void,
  deployment: Deployment,
): Promise<RunningNode> => {
  const store = deployment.storage;
  const { catalog } = store;
  const masterKey = loadMasterKey(config.dataDir, config.masterKey);
  const sealer = new SecretSealer(masterKey);
  const uploadSigner = new UploadSigner(masterKey, config.uploadTtlSeconds);
  const { credential: adminCredential, generatedSecret } = await operatorCredential(catalog, config);
  await bootstrapOrg(catalog, announce, deployment.bootstrapOrgId);

  const settings: ApiSettings = {
    publicUrl: config.publicUrl ?? '',
    publicUrlSet: config.publicUrl !== undefined,
    billingUrl: config.billingUrl,
    pageSize: config.pageSize,
    monthlyEventsLimit: 1_000_000_000,
    monthlyReadsLimit: 1_000_000_000,
    tokenExchangesPerSecond: config.tokenExchangesPerSecond,
    tokenExchangesPerAddress: config.tokenExchangesPerAddress,
  };
  await provisionAnonymousAccess(catalog, sealer).then(
    (orgs) => orgs.length > 0 && announce(`anonymous access records made for ${orgs.join(', ')}`),
  );
  const keyRing = new KeyRing(catalog, sealer);
  const authenticator = new Authenticator({
    catalog,
    keyRing,
    adminCredential,
    ownAudience: () => `${settings.publicUrl}/`,
  });
  const runtimeSettings: RuntimeSettings = {
    ...defaultRuntimeSettings,
    settleBudgetMs: config.settleTimeoutMs,
    isolateMemoryLimitMb: config.isolateMemoryMb,
    liveActorMemoryMb: config.liveActorMemoryMb,
    cpuLimitMs: config.cpuLimitMs,
    maxLiveActors: config.maxLiveActors,
    pureSteps: config.pureSteps,
    idleUnloadMs: config.idleSeconds * 1000,
    timerRetryDelayMs: config.timerRetryMs,
    madeInstancesPerSecond: config.madeInstancesPerSecond,
    httpApiRequestsPerSecond: config.httpApiRequestsPerSecond,
    egress: { allow: config.fetchAllow, timeoutMs: config.fetchTimeoutMs, maxResponseBytes: config.fetchMaxBytes },
  };
  const logs = new LogSink(store.logs, logger);
  const fault = faultHook(process.env);
  const { metrics } = deployment;
  // Machine code runs in a worker process (unless --sandbox inline): if it crashes V8, the worker restarts
  // and the node stays up.
  // A call that holds it past the stall limit retires it for a standby worker, and its org is moved to
  // the quarantine worker at once: one org's spinning or thrashing code does not hold up the others.
  const sandboxClient = new SandboxClient({
    role: 'main',
    inline: config.sandbox === 'inline',
    restartAfterCrash: true,
    nodeArgs: config.sandboxNodeArgs,
    stallMs: config.sandboxStallMs,
    cpuLimitMs: config.cpuLimitMs,
    onLog: (versionId, entry) => sandboxes.onLog(versionId, entry),
    onCrash: (reason) => {
      metrics.workerRestarted('main', 'crash');
      logger.warn('the sandbox worker died; a new one is starting', { reason });
    },
    onAnswered: metrics.sandboxCallTimer('main'),
    onStall: (stall) => {
      // (inline, nothing restarts: the call ran on the node's thread and is over)
      if (config.sandbox !== 'inline') metrics.workerRestarted('main', 'stall');
      const moved = stall.versionId === undefined ? undefined : sandboxes.quarantineVersion(stall.versionId, 'stall');
      const org = moved?.orgId === undefined ? '' : `, and so does every version of org ${moved.orgId}`;
      const until =
        config.quarantineReleaseMs > 0
          ? ` until it holds no worker for ${config.quarantineReleaseMs} ms (--quarantine-release-ms)`
          : ' from now on';
      logger.warn(
        `${config.sandbox === 'inline' ? inlineStallText(stall, config.sandboxStallMs) : stallText(stall, config.sandboxStallMs, 'sandbox worker')}${moved ? `; it runs in the quarantine worker${until}${org}` : ''}`,
      );
    },
    onLiveHeap: (report) => runtime.relieveLiveHeap(report),
  });
  // Versions that held or crashed a worker, with every version of their org, run in a worker of their
  // own at the lowest CPU priority (sandbox-pool.ts). It starts on first use.
  // Its watchdog stops a call that holds it (the culprit is stopped at its CPU limit and a second, as
  // in the main worker) and moves the others to a fresh worker; no standby is kept for it.
  const quarantineClient = new SandboxClient({
    role: 'quarantine',
    niceness: QUARANTINE_NICENESS,
    stallMs: config.sandboxStallMs,
    standby: false,
    cpuLimitMs: config.cpuLimitMs,
    onAnswered: metrics.sandboxCallTimer('quarantine'),
    onStall: (stall) => {
      metrics.workerRestarted('quarantine', 'stall');
      // Puts off the org's return to the main worker.
      if (stall.versionId !== undefined) sandboxes.quarantineVersion(stall.versionId, 'stall');
      logger.warn(stallText(stall, config.sandboxStallMs, 'quarantine sandbox worker'));
    },
    nodeArgs: config.sandboxNodeArgs,
    onLog: (versionId, entry) => sandboxes.onLog(versionId, entry),
    onCrash: (reason) => {
      metrics.workerRestarted('quarantine', 'crash');
      logger.warn('the quarantine sandbox worker died; a new one starts on the next call', { reason });
    },
    onLiveHeap: (report) => runtime.relieveLiveHeap(report),
  });
  // Uploaded bundles, not yet trusted, are validated in a third worker, started on first use: a bundle
  // whose top-level code crashes V8 takes only that one down. Not the quarantine worker: uploads would
  // wait behind the offenders' spins there, and its low priority would stretch their time limits.
  const validationClient = new SandboxClient({
    role: 'validation',
    nodeArgs: config.sandboxNodeArgs,
    onLog: () => undefined,
    onCrash: (reason) => {
      metrics.workerRestarted('validation', 'crash');
      logger.warn('the validation sandbox worker died; a new one starts with the next upload', { reason });
    },
  });
  const sandboxes = new SandboxPool(sandboxClient, quarantineClient, store.versions, logs, runtimeSettings, {
    afterMs: config.quarantineReleaseMs,
    onRelease: (orgId) =>
      logger.info(
        `org ${orgId} held no sandbox worker for ${config.quarantineReleaseMs} ms (--quarantine-release-ms): its versions run in the main worker again`,
      ),
  });
  const { updates } = deployment;
  const runtime: InstanceRuntime = new InstanceRuntime({
    instances: store.instances,
    sandboxes,
    versions: store.versions,
    machines: catalog,
    logs,
    settings: runtimeSettings,
    logger,
    onTimersPending: (dueAt) => scheduler.noteDue(dueAt),
    onOutbox: () => dispatcher.kick(),
    updates,
    ...(fault ? { fault } : {}),
    meters: metrics.runtimeMeters,
    // (migrations are uploaded code like versions' uploads: they run where uploads are checked)
    migrate: (code, input, onLog) => validationClient.migrate(code, input, sandboxes.loadSettings(), onLog),
  });
  const attached = deployment.attach(runtime);
  const reads =
    attached.reads ?? new LocalInstanceReads(store.instances, runtime, (orgId, machine) => catalog.hasInstances(orgId, machine));
  const scheduler = new TimerScheduler(store.instances, attached.fire, logger);
  attached.onReplicatedTimers?.((dueAt) => scheduler.noteDue(dueAt));
  const dispatcher = new OutboxDispatcher({
    store: store.instances,
    deliver: attached.deliver,
    ...(attached.shouldDispatch ? { shouldDispatch: attached.shouldDispatch } : {}),
    logs,
    logger,
    retryDelayMs: runtimeSettings.timerRetryDelayMs,
    maxRetries: runtimeSettings.timerMaxRetries,
    ...(fault ? { afterDelivered: () => fault('after-receiver-commit') } : {}),
  });
  attached.onReplicatedOutbox?.(() => dispatcher.kick());
  const apiContext: ApiContext = {
    catalog,
    authenticator,
    sealer,
    settings,
    logger,
    versions: store.versions,
    uploadSigner,
    tokenExchange: new TokenExchange({
      catalog,
      keyRing,
      sealer,
      // Identity providers' JWKS URLs are reached under the same egress policy as machine code's fetch.
      jwks: new JwksCache({ allow: parseAllowList(config.fetchAllow), timeoutMs: Math.min(config.fetchTimeoutMs, JWKS_TIMEOUT_MS) }),
      logger,
      maxIdentityProviders: limits.maxIdentityProvidersPerOrg,
    }),
    validateBundle: (code) => validationClient.validate(code, sandboxes.loadSettings()),
    machineDefinition: async (orgId, machine, versionId) => (await sandboxes.get(orgId, machine, versionId)).definition(),
    validateMigrationBundle: (code) => validationClient.validateMigration(code, sandboxes.loadSettings()),
    reads,
    logs: store.logs,
    runtime,
    writes: attached.writes,
    httpApis: new HttpApiRunner({
      runtime: {
        head: (o, m, n) => reads.head(o, m, n),
        create: (r) => attached.writes.create(r),
        send: (o, m, n, e, a) => attached.writes.send(o, m, n, e, a),
      },
      sandboxes,
      catalog,
      logs,
      settings: runtimeSettings,
    }),
    ...(deployment.cluster ? { cluster: deployment.cluster } : {}),
    storageRefusal: () => store.instances.writeRefusal?.(),
    realtimeStats: () => ({ ...server.websockets, subscribedInstances: hub.channelCount }),
    metrics: { public: config.metricsPublic, contentType: metrics.contentType, text: () => metrics.text() },
  };
  const router = buildRouter(apiContext);
  scheduler.start();
  dispatcher.start();
  const pruneLogs = () =>
    logs
      .prune(
        catalog.listOrgs().map((org) => org.id),
        config.logRetentionDays * 86_400_000,
      )
      .catch((error: unknown) => logger.error('log pruning failed', { error: String(error) }));
  void pruneLogs();
  const pruning = setInterval(() => void pruneLogs(), 3_600_000);
  pruning.unref();
  // Idle actors and versions are looked for a few times per idle period, at most once a minute.
  const sweeping = setInterval(() => runtime.sweepIdle(), Math.min(60_000, runtimeSettings.idleUnloadMs / 4));
  sweeping.unref();
  const realtimeLimits = {
    ...defaultRealtimeLimits,
    maxSubscriptionsPerSocket: config.rtMaxSubscriptions,
    maxSubscriptions: config.rtMaxNodeSubscriptions,
    maxSockets: config.rtMaxSockets,
    unsubscribedCloseMs: config.rtUnsubscribedCloseSeconds * 1000,
  };
  const hub = new RealtimeHub({
    runtime,
    bus: updates,
    fanout: { publish: (topic, text) => server.publish(topic, text) },
    authenticate: (token, orgHeader) => {
      if (token === '') throw unauthorized('the connection carries no token: connect to /rt?token=<token>');
      const caller = authenticator.authenticate({ authorization: `Bearer ${token}`, orgId: orgHeader, act: undefined });
      requireScope(caller, 'state.read');
      return {
        orgId: authenticator.resolveOrg(caller),
        authContext: caller.authContext,
        ...(caller.kind === 'key' ? { keyId: caller.keyId } : {}),
      };
    },
    keyExists: (keyId) => keyRing.find(keyId) !== undefined,
    head: (orgId, machine, name) => reads.head(orgId, machine, name),
    limits: realtimeLimits,
    logError: (message, error) => logger.error(message, { error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  });
  // Keys deleted through this node end their sockets' subscriptions at once; through another node
  // (the META log deletes them here), within a second.
  const dropRevoked = () => {
    try {
      hub.dropRevoked();
    } catch (error) {
      logger.error('realtime subscriptions of deleted keys could not be ended', {
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      });
    }
  };
  authenticator.onKeysChanged(dropRevoked);
  const revoking = setInterval(dropRevoked, 1_000);
  revoking.unref();
  const server: HttpServer = await HttpServer.start({
    router,
    host: config.host,
    port: config.port,
    maxBodyBytes: config.maxBodyBytes,
    logger,
    realtime: { hub, limits: realtimeLimits },
    onAnswered: metrics.answered,
    checkCredential: (headers) => void callerOf(authenticator, headers),
  });
  registerNodeMetrics(metrics, config, { runtime, sandboxes, server, hub });
  // Booted now, once listening (so it does not slow startup down): the first request that runs machine
  // code would otherwise wait ≈ 0.4 s for it.
  sandboxClient.start();
  // A cluster node takes its share only now, with its sandbox worker up and its instances' versions
  // loaded (a bounded number): the requests the others then send it do not wait for that.
  await deployment.ready?.(async (versions) => {
    await Promise.allSettled(versions.map(({ orgId, machine, versionId }) => sandboxes.get(orgId, machine, versionId)));
  });

  const hostForUrl = config.host.includes(':') ? `[${config.host}]` : config.host;
  settings.publicUrl = config.publicUrl ?? `http://${hostForUrl}:${server.port}`;
  deployment.listening?.(settings.publicUrl);
  if (generatedSecret) {
    announce(`generated the operator key; it is shown only this once: ${generatedSecret}`);
    announce(`  e.g. curl -H "Authorization: Bearer ${generatedSecret}" http://${hostForUrl}:${server.port}/orgs`);
  }
  announce(`the web console: ${settings.publicUrl}/console (sign in with the operator key)`);

  return {
    url: `http://${hostForUrl}:${server.port}`,
    port: server.port,
    async stop() {
      await deployment
        .leave?.()
        .catch((error: unknown) => logger.warn("could not hand this node's share over before leaving", { error: String(error) }));
      // The drain finishes what is in flight with the workers there are: none is started meanwhile
      // (a worker that dies now fails its requests 503, and is not blamed or replaced).
      sandboxClient.stopStarting();
      quarantineClient.stopStarting();
      validationClient.stopStarting();
      const drained = server.drain();
      const timedOut = await Promise.race([drained.then(() => false), delay(config.drainTimeoutMs).then(() => true)]);
      if (timedOut) logger.warn('drain timeout passed with requests still in flight; stopping anyway');
      scheduler.stop();
      dispatcher.stop();
      clearInterval(pruning);
      clearInterval(sweeping);
      clearInterval(revoking);
      await runtime.close();
      await Promise.all([sandboxClient.close(), quarantineClient.close(), validationClient.close()]);
      await deployment.close();
    },
  };
};

/** What every node's GET /metrics reads at a scrape (node-metrics.ts); the deployment adds its own. */
const registerNodeMetrics = (
  metrics: NodeMetrics,
  config: ServeConfig,
  parts: { runtime: InstanceRuntime; sandboxes: SandboxPool; server: HttpServer; hub: RealtimeHub },
): void => {
  const { runtime, sandboxes, server, hub } = parts;
  metrics.labelledGauge('statehold_actors', 'instances this node holds: live in a sandbox, or resting (their head only)', 'state', () => {
    const { held, live } = runtime.actorCounts();
    return { live, resting: held - live };
  });
  metrics.counter(
    'statehold_actor_evictions_total',
    'live actors evicted (idle, over --max-live-actors or a memory bound)',
    () => runtime.evictions,
  );
  metrics.counter('statehold_sandbox_quarantines_total', 'machine versions moved to the quarantine worker', () => sandboxes.quarantines);
  metrics.gauge(
    'statehold_sandbox_quarantined_orgs',
    'orgs whose versions run in the quarantine worker now',
    () => sandboxes.quarantinedOrgCount,
  );
  metrics.gauge('statehold_websocket_connections', 'realtime (/rt) websockets open', () => server.websockets.sockets);
  metrics.gauge('statehold_websocket_subscriptions', 'realtime subscriptions open, on every socket', () => hub.subscriptionCount);
  metrics.dataDirSizes(config.dataDir);
};

/** The log line of a stall (sandbox-client.ts). */
const stallText = ({ versionId, heldMs, cpuMs }: Stall, stallMs: number, worker: string): string =>
  `${versionId === undefined ? 'a call' : `machine version ${versionId}`} held the ${worker} for ${heldMs} ms${cpuMs === undefined ? '' : ` (${cpuMs} ms of CPU seen)`} (--sandbox-stall-ms ${stallMs}): the other requests moved to a fresh worker`;

/** The same for a call that ran in the node's own process (--sandbox inline): nothing was moved, as nothing waited in a worker. */
const inlineStallText = ({ versionId, heldMs, cpuMs }: Stall, stallMs: number): string =>
  `${versionId === undefined ? 'a call' : `machine version ${versionId}`} held the node's main thread for ${heldMs} ms (${cpuMs ?? heldMs} ms of CPU; --sandbox inline, --sandbox-stall-ms ${stallMs})`;

/**
 * The quarantine worker's CPU priority (nice 19, the lowest): the code there has held or crashed a
 * worker already, and a spin of it would otherwise take a whole core from the node and the main worker
 * on a small host. It still gets every cycle they leave; its CPU limits are measured by the clock, so
 * under contention its calls get less CPU before they hit them.
 */
const QUARANTINE_NICENESS = 19;

/** A token exchange waits for an identity provider's keys at most this long (or --fetch-timeout-ms, if less). */
const JWKS_TIMEOUT_MS = 5_000;

/** Configured key (never stored), else the stored hash, else a new key printed once. */
const operatorCredential = async (
  catalog: Catalog,
  config: ServeConfig,
): Promise<{ credential: AdminCredential; generatedSecret?: string }> => {
  if (config.adminKey) return { credential: AdminCredential.fromSecret(config.adminKey) };
  const stored = catalog.getAdminKey();
  if (stored) return { credential: AdminCredential.fromRecord(stored) };
  const generatedSecret = newAdminKey();
  const credential = AdminCredential.fromSecret(generatedSecret);
  await catalog.putAdminKey(credential.toRecord(new Date().toISOString()));
  return { credential, generatedSecret };
};

const bootstrapOrg = async (catalog: Catalog, announce: (line: string) => void, fixedId?: string): Promise<void> => {
  if (catalog.listOrgs().length > 0) return;
  const id = fixedId ?? prettyId('org');
  await catalog.createOrg({ id, name: 'default', createdAt: new Date().toISOString(), allowAnonymousAccess: true });
  announce(`created the bootstrap org ${id}`);
};

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
