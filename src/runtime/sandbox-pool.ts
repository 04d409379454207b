import { machineCodeFailed, notFound } from '../domain/errors.js';
import {
  BundleValidationError,
  type LoadSettings,
  MachineCodeError,
  type RemoteVersion,
  type SandboxClient,
  SandboxCrashedError,
  SandboxTimeoutError,
  type WorkerStats,
} from '../sandbox/index.js';
import type { LogSink } from './log-sink.js';
import { WorkerCrashFailure } from './request-retries.js';
import type { RuntimeSettings } from './runtime-settings.js';
import type { VersionSource } from './version-source.js';

/** Why a version was moved to the quarantine worker. */
type QuarantineCause = 'crash' | 'stall';

interface QuarantineRelease {
  /**
   * An org quarantined for holding a worker (not for crashing one) returns to the main worker after
   * this long without holding a worker again; 0: never.
   */
  afterMs: number;
  /** Told when an org returns. */
  onRelease?: (orgId: string) => void;
}

/**
 * Machine versions loaded in the sandbox worker, on first use, one isolate each shared by the
 * version's instances. A version whose isolate died (memory limit) or whose worker crashed is loaded
 * again on the next call; actors compare `sandbox` identity to know they must be rebuilt.
 *
 * A version proven to crash its worker, or that held it past the stall limit, is quarantined: from
 * then on it, and every other version of its org, runs in a worker of its own kind (the quarantine
 * worker), so that org's code cannot take the isolates of every other org down with it, or hold them
 * up, again. A crash keeps the org there until the node restarts. A stall is often one large input
 * rather than code that misbehaves: such an org returns to the main worker once it went
 * `release.afterMs` without another stall (each stall in the quarantine worker starts that wait again).
 */
export class SandboxPool {
  private readonly loading = new Map<string, Promise<RemoteVersion>>();
  /** Versions whose load finished, for callers that need not wait. */
  private readonly ready = new Map<string, RemoteVersion>();
  /** Where a version's console output is filed. */
  private readonly owners = new Map<string, { orgId: string; machine: string }>();
  /** When each version was last asked for (ms since the epoch), for unloading idle ones. */
  private readonly lastUsedAt = new Map<string, number>();

  /** Versions moved to the quarantine worker since start (GET /metrics). */
  quarantines = 0;

  /** Versions that run in the quarantine worker. */
  private readonly quarantined = new Set<string>();
  /**
   * Orgs one of whose versions was quarantined: all their versions run in the quarantine worker. Else
   * each new version of crashing code would take the main worker down once more, and an org could keep
   * every other org's live actors being rebuilt by uploading one version after another.
   */
  private readonly quarantinedOrgs = new Set<string>();
  /** Orgs quarantined for stalls only: when each returns to the main worker. */
  private readonly releaseAt = new Map<string, number>();

  constructor(
    private readonly client: SandboxClient,
    private readonly quarantine: SandboxClient,
    private readonly versions: VersionSource,
    private readonly logs: LogSink,
    private readonly settings: RuntimeSettings,
    private readonly release: QuarantineRelease = { afterMs: 0 },
  ) {}

  /** Routes console output captured in the worker to the version's org and machine. */
  readonly onLog = (versionId: string, entry: Parameters<LogSink['captured']>[2]): void => {
    const owner = this.owners.get(versionId);
    if (owner) this.logs.captured(owner.orgId, owner.machine, entry);
  };

  /** The version if it is loaded and healthy now (no waiting); else use get. */
  loaded(versionId: string): RemoteVersion | undefined {
    if (this.releaseAt.size > 0) this.releaseIfDue(this.owners.get(versionId)?.orgId);
    const version = this.ready.get(versionId);
    if (!version?.healthy) return undefined;
    this.lastUsedAt.set(versionId, Date.now());
    return version;
  }

  /** Forgets a version that no longer exists (its machine was deleted) and frees its isolate. */
  unload(versionId: string): void {
    this.drop(versionId);
    this.owners.delete(versionId);
    this.quarantined.delete(versionId);
  }

  /** Frees a version's isolate, wherever it runs; the next call loads it again. */
  private drop(versionId: string): void {
    this.loading.delete(versionId);
    this.ready.delete(versionId);
    this.lastUsedAt.delete(versionId);
    this.client.unload(versionId);
    this.quarantine.unload(versionId);
  }

  /** Orgs whose versions run in the quarantine worker now. */
  get quarantinedOrgCount(): number {
    return this.quarantinedOrgs.size;
  }

  /**
   * Moves a version, and every version of its org, to the quarantine worker: the next call loads them
   * there, and actors compare `sandbox` identity, so they are rebuilt there. Returns the version's org,
   * or undefined if the version was there already.
   */
  quarantineVersion(versionId: string, cause: QuarantineCause): { orgId: string | undefined } | undefined {
    const orgId = this.owners.get(versionId)?.orgId;
    if (orgId !== undefined) this.offended(orgId, cause);
    if (this.quarantined.has(versionId)) return undefined;
    this.quarantined.add(versionId);
    this.quarantines++;
    this.drop(versionId);
    if (orgId !== undefined && !this.quarantinedOrgs.has(orgId)) {
      this.quarantinedOrgs.add(orgId);
      for (const [other, owner] of this.owners) {
        if (owner.orgId === orgId && !this.quarantined.has(other) && (this.ready.has(other) || this.loading.has(other))) this.drop(other);
      }
    }
    return { orgId };
  }

  /**
   * A version of the org held or crashed its worker (in the quarantine worker too): the org's release
   * is put off, or, for a crash, called off.
   */
  private offended(orgId: string, cause: QuarantineCause): void {
    const permanent = cause === 'crash' || this.release.afterMs <= 0 || (this.quarantinedOrgs.has(orgId) && !this.releaseAt.has(orgId));
    if (permanent) this.releaseAt.delete(orgId);
    else this.releaseAt.set(orgId, Date.now() + this.release.afterMs);
  }

  /** Returns the org's versions to the main worker when its release is due: the next call loads them there. */
  private releaseIfDue(orgId: string | undefined): void {
    const at = orgId === undefined ? undefined : this.releaseAt.get(orgId);
    if (orgId === undefined || at === undefined || Date.now() < at) return;
    this.releaseAt.delete(orgId);
    this.quarantinedOrgs.delete(orgId);
    for (const [versionId, owner] of this.owners) {
      if (owner.orgId !== orgId) continue;
      this.quarantined.delete(versionId);
      if (this.ready.has(versionId) || this.loading.has(versionId)) this.drop(versionId);
    }
    this.release.onRelease?.(orgId);
  }

  private runsInQuarantine(orgId: string, versionId: string): boolean {
    return this.quarantined.has(versionId) || this.quarantinedOrgs.has(orgId);
  }

  /**
   * Unloads the versions nobody asked for since `before`, except those in `inUse` (versions that held
   * actors are on): their isolates go, and a later request loads them again. Returns those that went.
   */
  unloadUnusedSince(before: number, inUse: Set<string>): string[] {
    const unloaded: string[] = [];
    for (const versionId of [...new Set([...this.ready.keys(), ...this.loading.keys()])]) {
      if (inUse.has(versionId) || (this.lastUsedAt.get(versionId) ?? 0) >= before) continue;
      this.drop(versionId);
      unloaded.push(versionId);
    }
    return unloaded;
  }

  /** The loaded version of `machine` (a version belongs to one machine; its logs are filed under it). */
  async get(orgId: string, machine: string, versionId: string): Promise<RemoteVersion> {
    if (this.releaseAt.size > 0) this.releaseIfDue(orgId);
    this.lastUsedAt.set(versionId, Date.now());
    const pending = this.loading.get(versionId);
    if (pending) {
      const version = await pending;
      if (version.healthy) return version;
      if (this.loading.get(versionId) === pending) {
        this.loading.delete(versionId);
        this.ready.delete(versionId);
      }
      return this.get(orgId, machine, versionId);
    }
    const code = this.versions.getVersionCode(orgId, versionId);
    if (code === undefined) throw notFound(`machine version ${versionId} does not exist`);
    this.owners.set(versionId, { orgId, machine });
    const client = this.runsInQuarantine(orgId, versionId) ? this.quarantine : this.client;
    const load = client.load(versionId, code, this.loadSettings()).catch((error: unknown) => {
      throw loadFailure(versionId, error);
    });
    this.loading.set(versionId, load);
    load.then(
      (version) => {
        if (this.loading.get(versionId) === load) this.ready.set(versionId, version);
      },
      () => {
        if (this.loading.get(versionId) === load) this.loading.delete(versionId);
      },
    );
    return load;
  }

  /** What the sandbox workers hold (null: that worker does not run). */
  async stats(): Promise<{ main: WorkerStats | null; quarantine: WorkerStats | null }> {
    const [main, quarantine] = await Promise.all([this.client.stats(), this.quarantine.stats()]);
    return { main: main ?? null, quarantine: quarantine ?? null };
  }

  loadSettings(): LoadSettings {
    const { isolateMemoryLimitMb, liveActorMemoryMb, cpuLimitMs, egress, pureSteps } = this.settings;
    return { memoryLimitMb: isolateMemoryLimitMb, liveActorMemoryMb, cpuLimitMs, egress, pureSteps };
  }
}

/**
 * What a failed load of a version means to the request that needed it: the version's own code failed
 * (its top-level code or its exports, once more than at upload: they may read the clock, or be a
 * Proxy) is the machine's fault, a 400 as a step's failure is; the rest (a crash, a moved or retired
 * worker, memory) goes on as it is, for the retries. A worker that died while it loaded the version
 * is what it is while a step runs (a MachineCodeError too, but not the version's fault when killed from
 * outside, by the OOM killer say): the request runs once more, then gets its 503, or its 400 and the
 * version its blame when the crash was the version's own.
 */
const loadFailure = (versionId: string, error: unknown): unknown => {
  if (error instanceof SandboxCrashedError) return WorkerCrashFailure.of(error);
  return error instanceof BundleValidationError || error instanceof MachineCodeError || error instanceof SandboxTimeoutError
    ? machineCodeFailed(`machine version ${versionId} could not be loaded: ${error.message}`)
    : error;
};
