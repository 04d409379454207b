import { notFound } from '../domain/errors.js';
import { VersionIsolate } from '../sandbox/index.js';
import type { LogSink } from './log-sink.js';
import type { RuntimeSettings } from './runtime-settings.js';
import type { VersionSource } from './version-source.js';

/**
 * One isolate per machine version, loaded on first use and shared by the version's instances. An
 * isolate that died (memory limit) is replaced on the next call; actors check `isolate` identity to
 * know they must be rebuilt.
 */
export class SandboxPool {
  private readonly isolates = new Map<string, Promise<VersionIsolate>>();

  constructor(
    private readonly versions: VersionSource,
    private readonly logs: LogSink,
    private readonly settings: RuntimeSettings,
  ) {}

  /** The isolate of a version of `machine` (a version belongs to one machine; its logs are filed under it). */
  async get(orgId: string, machine: string, versionId: string): Promise<VersionIsolate> {
    const loading = this.isolates.get(versionId);
    if (loading) {
      const isolate = await loading;
      if (isolate.healthy) return isolate;
      if (this.isolates.get(versionId) === loading) this.isolates.delete(versionId);
      return this.get(orgId, machine, versionId);
    }
    const code = this.versions.getVersionCode(orgId, versionId);
    if (code === undefined) throw notFound(`machine version ${versionId} does not exist`);
    const load = VersionIsolate.load({
      versionId,
      code,
      memoryLimitMb: this.settings.isolateMemoryLimitMb,
      cpuLimitMs: this.settings.cpuLimitMs,
      egress: this.settings.egress,
      onLog: (entry) => this.logs.captured(orgId, machine, entry),
    });
    this.isolates.set(versionId, load);
    load.catch(() => this.isolates.delete(versionId));
    return load;
  }

  async close(): Promise<void> {
    const all = [...this.isolates.values()];
    this.isolates.clear();
    for (const loading of all) {
      try {
        (await loading).dispose();
      } catch {
        // a version that failed to load has nothing to dispose
      }
    }
  }
}
