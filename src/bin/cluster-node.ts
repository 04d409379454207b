import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { WriteOutcomes } from '../domain/write-outcomes.js';
import { Forwarder } from '../cluster/forwarder.js';
import { HANDOVER_MAX_MS, Membership } from '../cluster/membership.js';
import { NatsUpdateBus } from '../cluster/nats-update-bus.js';
import { PartitionOwnership } from '../cluster/partition-ownership.js';
import { toBase64Url } from '../domain/base64url.js';
import { withinMs } from '../domain/within-ms.js';
import type { Logger } from '../domain/logger.js';
import { progress } from '../domain/progress.js';
import { summaryOf, viewOf } from '../store/instance-reads.js';
import { RequestMovedError } from '../store/instance-store.js';
import { LogInstanceStore } from '../store/jetstream/log-instance-store.js';
import { PartitionGivenUpError } from '../store/jetstream/partition-copy.js';
import { applyMetaOp, type MetaOp } from '../store/jetstream/meta-ops.js';
import { JetStreamOpLog } from '../store/jetstream/op-log.js';
import { ReplicatedCatalog } from '../store/jetstream/replicated-catalog.js';
import { applyLogsOp, type LogsOp, ReplicatedLogStore } from '../store/jetstream/replicated-logs.js';
import { openCodeStore, ReplicatedVersionStore } from '../store/jetstream/replicated-versions.js';
import { SharedUsage } from '../store/jetstream/shared-usage.js';
import { JetStreamTransitionLog } from '../store/jetstream/transition-log.js';
import { lockDataDir } from '../store/lmdb/data-dir-lock.js';
import { openLmdbNodeStore } from '../store/lmdb/lmdb-node-store.js';
import type { ClusterConfig } from './node-config.js';
import { composeNode, type RunningNode } from './node-composition.js';
import { NodeMetrics } from './node-metrics.js';
import { ConfigError, type ServeConfig } from './serve-config.js';

/** Where a node keeps how far it applied the cluster's logs, so a restart resumes instead of replaying. */
const CHECKPOINT_FILE = 'cluster-applied.json';
const CHECKPOINT_EVERY_MS = 1_000;
/** How long a metadata write waits for the other nodes to apply it (a node that lags longer is skipped). */
const META_PEER_WAIT_MS = 2_000;
/** How long a node that leaves waits for the others to catch up its share before it goes anyway. */
const LEAVE_WAIT_MS = 10_000;
/** Machine versions a joining node loads before it takes its share, at most, and how long it waits for them. */
const WARM_VERSIONS = 32;
const WARM_MAX_MS = 5_000;
/** How long each step of a node's stop may wait on NATS before the node goes on without it. */
const CLOSE_STEP_MS = 5_000;
/** How often the node pings its nats-server, and how many pings may go unanswered before it moves to another. */
const NATS_PING_INTERVAL_MS = 1_500;
const NATS_MAX_PINGS_OUT = 3;
/** How often a node asks whether it can commit (GET /health), and how long the answer may take. */
const WRITABLE_PROBE_EVERY_MS = 1_000;
const WRITABLE_PROBE_MS = 1_500;
/** How often a node checks whether the partitions it is to take are caught up (to say it is ready, or warm). */
const READINESS_CHECK_MS = 50;
/** How long after the members last changed a node starts catching up the partitions it newly stands by for. */
const STANDBY_DELAY_MS = 3_000;
/** A suspected member (no one listened on its subject) is asked again after each of these waits; gone only if no one listens each time. */
const DEPARTURE_PROBES_MS = [50, 200];
const DEPARTURE_PROBE_TIMEOUT_MS = 300;

interface RunningClusterNode extends RunningNode {
  membership: Membership;
}

/**
 * The composition root of `statehold node`: JetStream holds what is true (the TX log of instance
 * commits, the META log of orgs, keys, machines and versions, code in an object store); this node's
 * LMDB is its copy, fed from those logs; NATS carries membership, forwarding to owners and realtime
 * news (cluster/README.md).
 */
export const startClusterNode = async (
  config: ServeConfig & ClusterConfig,
  logger: Logger,
  announce: (line: string) => void,
): Promise<RunningClusterNode> => {
  if (!config.masterKey)
    throw new ConfigError('statehold node needs STATEHOLD_MASTER_KEY, the same on every node (key secrets are sealed under it)');
  if (!config.adminKey) throw new ConfigError('statehold node needs --admin-key (or STATEHOLD_ADMIN_KEY), the same on every node');
  const lock = await lockDataDir(config.dataDir);
  if (lock.unguarded) logger.warn(`${lock.unguarded}: nothing stops a second node on this data dir; run one only`);
  const onError = (message: string, error: unknown) =>
    logger.error(message, { error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  // JetStream is the durability: the local copy syncs neither its log's frames nor LMDB write by write
  // (the checkpoint names only positions `flushed()` made durable). Its commits go through the log
  // all the same: readable at once and written to LMDB in batches, where a write waited for its own
  // LMDB transaction before (a lone write on cluster-1: 1.2 → 0.75–0.86 ms; bench/JOURNAL.md 2026-11-29 13:45).
  const local = openLmdbNodeStore(config.dataDir, { commitLog: 'wal', walSyncFrames: false, syncEachWrite: false });
  const checkpointPath = join(config.dataDir, CHECKPOINT_FILE);
  const from = readCheckpoint(checkpointPath);
  // (retried like the streams below: a node may start before its nats-servers, or while they are slow)
  const nc = await untilOpen(
    'a connection to NATS',
    () =>
      connect({
        servers: config.nats,
        name: `statehold-${config.cluster}-${config.nodeId}`,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        // A server that hangs (stopped, its host frozen, a link dead one way) keeps the TCP connection up:
        // only unanswered pings tell, and with the client's defaults (every 2 minutes, 2 missed) the node
        // stayed on it for minutes while the other servers served; now it moves after ≈ 4.5–6 s. A dial
        // that gets no INFO gives up after 2 s (20 s by default), so a reconnect that picks the hung
        // server again moves on soon.
        pingInterval: NATS_PING_INTERVAL_MS,
        maxPingOut: NATS_MAX_PINGS_OUT,
        timeout: 2_000,
        // Without it the client makes an Error with a stack trace for every request it sends (each append,
        // each direct get), for a trace it adds only if the request fails: ≈ 9 % of a node's main thread.
        noAsyncTraces: true,
      }),
    announce,
  );
  const { cluster, replicas } = config;
  const code = await untilOpen('the code store', () => openCodeStore(nc, { cluster, replicas }), announce);
  const meta = await untilOpen(
    'the META log',
    () =>
      JetStreamOpLog.open<MetaOp>(
        nc,
        { cluster, name: 'META', replicas, from: from.meta + 1 },
        applyMetaOp(local.catalog, local.versions, code, local.instances, onError),
        onError,
      ),
    announce,
  );
  const logs = await untilOpen(
    'the LOGS log',
    () =>
      JetStreamOpLog.open<LogsOp>(
        nc,
        { cluster, name: 'LOGS', replicas, from: from.logs + 1, maxAgeMs: config.logRetentionDays * 86_400_000 },
        applyLogsOp(local.logs),
        onError,
      ),
    announce,
  );
  const txLog = await untilOpen(
    'the TX log',
    () => JetStreamTransitionLog.open(nc, { cluster, replicas, partitions: config.partitions }),
    announce,
  );
  const usage = new SharedUsage({
    // (counts need no read-your-writes on other nodes: no waiting for them)
    submit: async ({ orgId, usage: counts, machine, atMs, run, totals }) => {
      await meta.submit(
        { store: 'usage', method: 'addUsage', args: [orgId, counts, machine ?? null, atMs, run, totals] },
        { everywhere: false },
      );
    },
    log: (level, message) => logger[level](message),
  });
  const instances = new LogInstanceStore(local.instances, txLog, onError, {
    nodeId: config.nodeId,
    note: (message) => logger.warn(message),
    shareUsage: (orgId, counts, machine, atMs) => usage.add({ orgId, usage: counts, machine, atMs }),
  });
  // Metadata first: serve only with every acknowledged org, key, machine and version applied here.
  await meta.catchUp();
  const membership = new Membership(nc, {
    cluster,
    self: { id: config.nodeId, url: '' },
    heartbeatMs: config.heartbeatMs,
    missedHeartbeats: config.missedHeartbeats,
    readyAtStart: false,
  });
  await membership.start();
  // A write to orgs, keys, machines or versions answers once every live node has it.
  meta.setPeers({ nodeId: config.nodeId, members: () => membership.all(), waitMs: META_PEER_WAIT_MS });

  const ownership = new PartitionOwnership({
    self: config.nodeId,
    count: instances.partitionCount,
    standbys: config.standbys,
    view: membership,
  });
  const metrics = new NodeMetrics();
  metrics.storeBacklog(() => local.instances.backlog());
  /** Partitions whose owner changed in this node's view, counted on each change of members (GET /metrics). */
  let ownershipMoves = 0;
  let owners: Array<string | undefined> | undefined;
  const countMoves = () => {
    const now = Array.from({ length: ownership.count }, (_, partition) => ownership.ownerOf(partition));
    if (owners) ownershipMoves += now.filter((owner, partition) => owner !== owners?.[partition]).length;
    owners = now;
  };
  metrics.counter('statehold_partition_moves_total', "partitions whose owner changed, in this node's view", () => ownershipMoves);
  metrics.gauge('statehold_partitions_owned', 'partitions this node owns now', () => ownership.owned().size);
  metrics.gauge(
    'statehold_partitions_held',
    'partitions this node holds: owns, is to own, or stands by for',
    () => instances.partitions().length,
  );
  metrics.gauge('statehold_cluster_members', 'members that own a share, as this node sees them', () => membership.current().length);
  const forwarded = metrics.timedCounter(
    'statehold_forwarded_request_duration_seconds',
    "requests this node sent to another node (an instance's owner, a list's or query's part), by how they ended, and how long each took",
    'outcome',
  );
  const resume = new Map<number, number>(Object.entries(from.tx).map(([partition, seq]) => [Number(partition), seq]));
  // The local copy is not synced write by write (JetStream is the truth): the checkpoint names only
  // positions whose writes LMDB has synced, so a restart after a crash resumes where its copy holds
  // everything before, and replays what it lost.
  let durable = { meta: from.meta, logs: from.logs };
  const writeDurable = () => {
    const held = instances.appliedPositions();
    writeCheckpoint(checkpointPath, { ...durable, tx: Object.fromEntries([...resume].filter(([partition]) => partition in held)) });
  };
  let checkpointing: Promise<void> | undefined;
  const checkpoint = (): Promise<void> =>
    (checkpointing ??= (async () => {
      const marks = instances.appliedMarks();
      const applied = { meta: meta.appliedSeq, logs: logs.appliedSeq };
      await local.flushed();
      // (not a partition given up meanwhile, nor one given up and taken again: its rows are being caught up anew)
      for (const mark of marks) if (instances.stillHolds(mark)) resume.set(mark.partition, mark.seq);
      durable = applied;
      writeDurable();
    })().finally(() => (checkpointing = undefined)));
  // Partitions this node stands by for that it does not hold yet are taken STANDBY_DELAY_MS after the
  // members last changed: a failover's catch-up of what it must own now is not slowed by catching up
  // the new standbys that the same change makes (measured: p50 1.4 → 1.8 s with them at once).
  let standbyTimer: NodeJS.Timeout | undefined;
  const hold = (newStandbys = false) => {
    countMoves();
    const holding = new Set(instances.partitions().map((copy) => copy.partition));
    const held = ownership.needed();
    let deferred = 0;
    for (const partition of ownership.standingBy()) {
      if (newStandbys || holding.has(partition)) held.add(partition);
      else deferred++;
    }
    clearTimeout(standbyTimer);
    if (deferred > 0) {
      standbyTimer = setTimeout(() => hold(true), STANDBY_DELAY_MS);
      standbyTimer.unref();
    }
    // (a partition given up is dropped from the store: a later take-over follows it from the start)
    for (const partition of resume.keys()) if (!held.has(partition)) resume.delete(partition);
    instances.own(nc, held, (partition) => (resume.get(partition) ?? 0) + 1);
    // Written before the rows of what was given up go, so that a restart never resumes a partition it dropped.
    writeDurable();
  };
  hold();
  membership.onChange(() => hold());
  // (a long catch-up says how far it is every --progress interval; the span counts stream positions)
  const catchingUp = progress("catching up with the cluster's log", 'log positions', config.progressEveryMs, announce);
  for (;;) {
    const { ready, held, done, total } = instances.catchUpProgress();
    if (ready === held) {
      catchingUp.end(done);
      break;
    }
    catchingUp.step(done, total, `${ready} of ${held} partitions ready`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const checkpoints = setInterval(
    () => void checkpoint().catch((error: unknown) => onError('could not write the checkpoint', error)),
    CHECKPOINT_EVERY_MS,
  );
  checkpoints.unref();
  announce(`joined cluster ${cluster} as ${config.nodeId}; members: ${membership.all().join(', ')}`);
  /**
   * Tells the others which draining members' shares this node has caught up (a draining member leaves
   * once every other did).
   */
  const readiness = setInterval(() => {
    // (while no member drains there is nothing to say: the last word, an empty list, stands)
    if (membership.draining().length === 0) return membership.setWarm([]);
    const ready = new Set(
      instances
        .partitions()
        .filter((held) => held.ready)
        .map((held) => held.partition),
    );
    membership.setWarm(ownership.warmFor(ready));
  }, READINESS_CHECK_MS);
  readiness.unref();

  let forwarder: Forwarder | undefined;
  let natsState = 'connected';
  metrics.labelledGauge('statehold_nats_connection', "this node's NATS connection: 1 for the state it is in", 'state', () => ({
    connected: natsState === 'connected' ? 1 : 0,
    reconnecting: natsState === 'reconnecting' ? 1 : 0,
    disconnected: natsState === 'disconnected' ? 1 : 0,
  }));
  // Whether this node can commit now (the TX log answers and has a leader), asked every second; and
  // whether the writes through it lately did (domain/write-outcomes.ts: what the log's info misses).
  const writeOutcomes = new WriteOutcomes();
  txLog.observeAppends((failure) => writeOutcomes.note(failure));
  let unwritable: string | undefined;
  let probing = false;
  const probe = setInterval(() => {
    if (probing) return;
    probing = true;
    void txLog
      .unwritable(WRITABLE_PROBE_MS)
      .then((reason) => {
        if (reason !== undefined && unwritable === undefined) logger.warn(`not serving: ${reason}`);
        else if (reason === undefined && unwritable !== undefined) logger.info("the cluster's log takes writes again");
        unwritable = reason;
      })
      .finally(() => (probing = false));
  }, WRITABLE_PROBE_EVERY_MS);
  probe.unref();
  // The instances this node checked its copy of against the log since it last could have missed
  // another node's writes (a change of members, a NATS reconnect, a stall of its own): see prepare.
  const verified = new Set<string>();
  const unverify = () => verified.clear();
  // (not an audit of the instances held at every change of members: a node joining is ordinary work, and
  // one cut off with its server had its followers fail, which asks for one)
  membership.onChange(unverify);
  membership.onStall(() => {
    unverify();
    instances.auditSoon();
    logger.warn(
      `this node did not beat for more than ${config.heartbeatMs * config.missedHeartbeats} ms (stopped or stalled): it checks each instance against the log before it serves it again`,
    );
  });
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') natsState = 'disconnected';
      else if (status.type === 'reconnect') natsState = 'connected';
      else if (status.type === 'reconnecting') natsState = 'reconnecting';
      if (status.type === 'disconnect' || status.type === 'reconnect') unverify();
      // (the server it reconnected to may hold a replica that diverged while this node was away)
      if (status.type === 'reconnect') instances.auditSoon();
    }
  })().catch(() => undefined);
  /**
   * Before this node runs a request as an instance's owner: not while it was stalled past its beats
   * (the others may own its instances now: the request goes back to the asker, which asks the owner in
   * its view); a request asked again after a lost answer is fenced in the log first (LogInstanceStore.
   * fence: the node that first took it cannot commit it any more, and this node's copy holds all it
   * did); the first request for an instance since this node could have missed writes waits for its copy
   * to hold the instance's last logged entry, so that nothing, a 4xx included, is decided on a stale head.
   */
  const prepare = async (
    orgId: string,
    machine: string,
    name: string,
    request: { retried: boolean; requestId?: string },
  ): Promise<{ retried: boolean }> => {
    if (membership.stalled()) {
      unverify();
      throw new RequestMovedError(`node ${config.nodeId} was stalled past its heartbeats; ask the owner again`);
    }
    // (a partition this node just took is caught up with the log before anything of it is answered)
    try {
      await instances.partitionReady(orgId, machine, name);
    } catch (error) {
      // Given up while the request waited: a first copy ran nowhere and is asked of the new owner; one
      // asked again after a lost answer may have run elsewhere, and stays a 503 (PartitionGivenUpError).
      if (error instanceof PartitionGivenUpError && !request.retried)
        throw new RequestMovedError(`partition ${error.partition} was given up by node ${config.nodeId}; ask its owner`);
      throw error;
    }
    const key = `${orgId}/${machine}/${name}`;
    // A copy of a request that was fenced, which is not itself asked again, is a late one (held up on
    // the way while its asker gave up on it, seen under a partition): the copy asked again may have
    // applied it already, so it is looked for in the history first, as for that copy.
    const retried = request.retried || (request.requestId !== undefined && instances.wasFenced(request.requestId));
    if (request.retried && request.requestId !== undefined) await instances.fence(orgId, machine, name, request.requestId);
    else if (!verified.has(key)) await instances.ensureCurrent(orgId, machine, name);
    else return { retried };
    if (verified.size >= MAX_VERIFIED) verified.clear();
    verified.add(key);
    return { retried };
  };
  const node = await composeNode(config, logger, announce, {
    metrics,
    storage: {
      catalog: new ReplicatedCatalog(local.catalog, meta),
      versions: new ReplicatedVersionStore(local.versions, meta, code, onError),
      instances,
      logs: new ReplicatedLogStore(local.logs, logs),
    },
    updates: new NatsUpdateBus(nc, { cluster, nodeId: config.nodeId, onError }),
    bootstrapOrgId: bootstrapOrgIdOf(cluster),
    listening: (url) => membership.setUrl(url),
    cluster: {
      health: () => {
        const members = membership.current();
        const joined = members.includes(config.nodeId);
        const reason =
          natsState !== 'connected'
            ? `NATS ${natsState}`
            : (unwritable ??
              writeOutcomes.problem() ??
              (membership.self === 'draining'
                ? 'leaving: handing its share over to the other nodes'
                : joined
                  ? undefined
                  : membership.self === 'joining'
                    ? 'catching up the partitions it is to own'
                    : 'not joined'));
        const ready = reason === undefined;
        return {
          ready,
          ...(ready ? {} : { reason }),
          nodeId: config.nodeId,
          members: members.length,
          nats: natsState,
        };
      },
      status: (instance) => ({
        nodeId: config.nodeId,
        cluster,
        replicas,
        nats: natsState,
        state: membership.self,
        members: membership.all().map((id) => membership.member(id)),
        appliedSeq: { meta: meta.appliedSeq, logs: logs.appliedSeq },
        /** The partitions this node holds: the ones it owns, and the ones it catches up to take over. */
        partitions: { count: instances.partitionCount, held: instances.partitions() },
        /** The instances this node holds (of the partitions it owns or takes over): each is held by its owner only. */
        heldInstances: instances.reads.heldInstances(ownership.owned()),
        /** The instances this node's LMDB keeps: the held ones (with standbys, also those it stands by for), and no others. */
        storedInstances: instances.reads.storedInstances(),
        /** Messages between instances this node's copy still holds (delivered ones go within milliseconds). */
        outboxEntries: local.instances.listOutbox(10_000).length,
        ...(instance && forwarder
          ? { instance: { ...instance, owner: forwarder.ownerOf(instance.orgId, instance.machine, instance.name) } }
          : {}),
      }),
    },
    attach: (runtime) => {
      const owner = new Forwarder(nc, runtime, {
        cluster,
        nodeId: config.nodeId,
        onWrite: (failure) => writeOutcomes.note(failure),
        members: () => membership.current(),
        partitions: {
          count: instances.partitionCount,
          of: (orgId, machine, name) => instances.partitionOf(orgId, machine, name),
          owner: (partition) => ownership.ownerOf(partition),
        },
        reads: {
          head: (orgId, machine, name) => {
            const head = runtime.head(orgId, machine, name);
            return head && viewOf(head);
          },
          history: (orgId, machine, name, afterSeq, limit) => instances.listTransitions(orgId, machine, name, afterSeq, limit),
          listPart: async (partitions, orgId, machine, afterName, limit) => {
            if (!ownership.ownsAll(partitions)) return 'moved';
            const part = await instances.reads.listPart(partitions, orgId, machine, afterName, limit);
            return part === 'moved' ? part : part.map(summaryOf);
          },
          queryPart: (partitions, query) =>
            ownership.ownsAll(partitions) ? instances.reads.queryPart(partitions, query) : Promise.resolve('moved' as const),
        },
        timeoutMs: config.settleTimeoutMs + 10_000,
        onError,
        onAsked: forwarded,
        prepare,
        foundAfterCatchUp: async (orgId, machine, name) => {
          if (instances.getInstance(orgId, machine, name)) return true;
          await instances.ensureCurrent(orgId, machine, name);
          return instances.getInstance(orgId, machine, name) !== undefined;
        },
        suspect: (nodeId, why) => membership.suspect(nodeId, why),
      });
      owner.start();
      forwarder = owner;
      // A suspected member is asked twice, a little apart (a node that lost its NATS server is back on
      // another within that), before it is taken for gone; once, at once, when another node checked so.
      membership.confirmDeparturesWith(async (nodeId, checkedElsewhere) => {
        for (const wait of checkedElsewhere ? [0] : DEPARTURE_PROBES_MS) {
          await new Promise((resolve) => setTimeout(resolve, wait));
          if ((await owner.probe(nodeId, DEPARTURE_PROBE_TIMEOUT_MS)) !== 'gone') return false;
        }
        return true;
      });
      // A newcomer owns its share once this node's beats count it, and they do once the requests and
      // timers this node was running on the instances it gave away have committed or failed: the
      // newcomer's first look at such an instance's log then finds them (HANDOVER_MAX_MS at most).
      membership.handOverWith(async () => {
        const owns = (orgId: string, machine: string, name: string) => owner.owns(orgId, machine, name);
        const settled = await Promise.all([owner.settleNotOwned(HANDOVER_MAX_MS), runtime.settleNotOwned(owns, HANDOVER_MAX_MS)]);
        if (settled.includes(false))
          logger.warn(`work on instances handed over was still running after ${HANDOVER_MAX_MS} ms; the newcomer takes them now`);
      });
      membership.onChange((members) => {
        const dropped = runtime.releaseNotOwned((orgId, machine, name) => owner.owns(orgId, machine, name));
        logger.info(`cluster members: ${members.join(', ')}${dropped > 0 ? `; let go of ${dropped} instances other nodes own now` : ''}`);
      });
      return {
        writes: owner,
        // Delayed events run machine code as requests do, so they wait for what a request waits for (see
        // prepare): a node that just took the instance's partition fires them once its copy has caught up,
        // not on a head it is still replaying (that run's commit fails, and its code ran for nothing: its
        // console lines and fetches twice, the differential test saw, after a cluster's restart).
        fire: async (orgId, machine, name) => {
          if (!owner.owns(orgId, machine, name)) return 'not-owner';
          try {
            await prepare(orgId, machine, name, { retried: false });
          } catch (error) {
            if (error instanceof RequestMovedError) return 'not-owner';
            throw error;
          }
          return owner.owns(orgId, machine, name) ? runtime.fireTimers(orgId, machine, name) : 'not-owner';
        },
        deliver: (message) => owner.receive(message),
        shouldDispatch: (message) => owner.owns(message.orgId, message.from.machine, message.from.name),
        onReplicatedTimers: (listener) => instances.onTimersApplied(listener),
        onReplicatedOutbox: (listener) => instances.onOutboxApplied(listener),
        reads: owner,
      };
    },
    /**
     * Takes this node's share once its instances' versions (of the partitions it holds; a bounded
     * number, WARM_VERSIONS, for WARM_MAX_MS at most) are loaded: the others then give it up and ask
     * this node for it, and those requests find it warm.
     */
    async ready(preload) {
      const versions = instances.reads.heldVersions(WARM_VERSIONS, (orgId, machine, name) => instances.holds(orgId, machine, name));
      await Promise.race([preload(versions), new Promise((resolve) => setTimeout(resolve, WARM_MAX_MS).unref())]);
      membership.setReady();
    },
    /**
     * A node that stops hands its share over first: it says it is draining, keeps answering while the
     * others catch up the partitions they are to take from it, and leaves once they all say they did
     * (or after LEAVE_WAIT_MS): they then own them warm.
     */
    async leave() {
      // (a node that owns nothing yet, or is alone, leaves at once: close() says so to the others)
      if (membership.current().length <= 1 || !membership.drain()) return;
      const until = Date.now() + LEAVE_WAIT_MS;
      while (Date.now() < until && !membership.warmFor(config.nodeId)) await new Promise((resolve) => setTimeout(resolve, 20));
      if (!membership.warmFor(config.nodeId))
        logger.warn(`the other nodes did not catch up this node's share within ${LEAVE_WAIT_MS} ms; leaving anyway`);
      await membership.stop();
    },
    async close() {
      // Each step that waits on NATS is bounded: a node told to stop exits (a clean-clone CI run saw one wait
      // for ever after its HTTP server had closed, its NATS connection still open); what it holds is in
      // JetStream, and its checkpoint only ever names what it applied.
      const bounded = async (what: string, work: () => Promise<unknown>): Promise<void> => {
        const done = await withinMs(
          work().then(() => true),
          CLOSE_STEP_MS,
          () => undefined,
        ).catch((error: unknown) => onError(`stopping: ${what} failed`, error));
        if (done !== true) logger.warn(`stopping: ${what} did not finish within ${CLOSE_STEP_MS} ms; going on`);
      };
      clearInterval(readiness);
      clearTimeout(standbyTimer);
      clearInterval(probe);
      forwarder?.stop();
      await bounded('leaving the membership', () => membership.stop());
      await bounded('sending the last usage counts', () => usage.flush());
      usage.stop();
      clearInterval(checkpoints);
      await bounded("stopping the partitions' followers", () => instances.stopFollowing());
      await bounded('closing the META log', () => meta.close());
      await bounded('closing the LOGS log', () => logs.close());
      await bounded('writing the checkpoint', checkpoint);
      await bounded('draining the NATS connection', () => nc.drain());
      await local.close();
      await lock.release();
    },
  });
  return { ...node, membership };
};

/** Instances remembered as checked against the log (see prepare); past it, all are checked again. */
const MAX_VERIFIED = 100_000;

/** How long a starting node waits for NATS and JetStream (nats-servers starting, or still electing their leaders). */
const JETSTREAM_WAIT_MS = 60_000;

/**
 * Opens the connection to NATS, or one of the cluster's streams, asking again while it fails (a node
 * started before, with or just after its nats-servers: they may not listen yet, and their JetStream
 * meta group elects a leader first), with a line every 5 s; what still fails after JETSTREAM_WAIT_MS
 * stops the start.
 */
const untilOpen = async <T>(what: string, open: () => Promise<T>, announce: (line: string) => void): Promise<T> => {
  const started = Date.now();
  let told = started;
  for (let attempt = 0; ; attempt++) {
    try {
      return await open();
    } catch (error) {
      if (Date.now() - started > JETSTREAM_WAIT_MS) throw error;
      if (Date.now() - told > 5_000) {
        told = Date.now();
        announce(`waiting to open ${what}: ${error instanceof Error ? error.message : String(error)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 1_000)));
    }
  }
};

/** One org id per cluster name, so nodes that start together on an empty cluster make a single bootstrap org. */
const bootstrapOrgIdOf = (cluster: string): string =>
  `org_${toBase64Url(createHash('sha256').update(`statehold bootstrap org of ${cluster}`).digest().subarray(0, 16))}`;

interface Applied {
  meta: number;
  /** By partition this node holds: the stream sequence up to which its entries are applied here. */
  tx: Record<string, number>;
  logs: number;
}

const readCheckpoint = (path: string): Applied => {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<Record<keyof Applied, unknown>>;
    const seq = (value: unknown) => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0);
    // (a checkpoint of a release before partitions has one number here: nothing to resume from)
    const tx: Record<string, number> = {};
    if (typeof parsed.tx === 'object' && parsed.tx !== null)
      for (const [partition, value] of Object.entries(parsed.tx)) if (/^\d+$/.test(partition) && seq(value) > 0) tx[partition] = seq(value);
    return { meta: seq(parsed.meta), tx, logs: seq(parsed.logs) };
  } catch {
    return { meta: 0, tx: {}, logs: 0 };
  }
};

const writeCheckpoint = (path: string, applied: Applied): void => {
  try {
    writeFileSync(path, JSON.stringify(applied));
  } catch {
    // (a lost checkpoint costs a longer replay at the next start, nothing else)
  }
};
