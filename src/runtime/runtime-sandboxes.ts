/**
 * The narrowest view of the sandbox the runtime works with: what it asks of the pool of loaded machine
 * versions, and of one loaded version. The node gives it SandboxPool (sandbox-pool.ts), whose versions
 * are RemoteVersions in a sandbox worker (sandbox/worker/sandbox-client.ts); a test may give it a
 * scripted fake that answers with step results of the same shape (test/helpers/fake-sandbox.ts).
 */
import type { RemoteVersion, WorkerStats } from '../sandbox/index.js';

/** One loaded machine version: its actors' steps, its authorizers, its health. */
export type VersionSandbox = Pick<
  RemoteVersion,
  | 'versionId'
  | 'healthy'
  | 'activitySeq'
  | 'nextActivity'
  | 'rememberedPaths5'
  | 'allowRead'
  | 'allowReads'
  | 'allowWrite'
  | 'start'
  | 'startAuthorized'
  | 'send'
  | 'sendAuthorized'
  | 'advance'
  | 'stopChildren'
  | 'stop'
>;

/** The machine versions loaded for the runtime, loaded on first use. */
export interface RuntimeSandboxes {
  /** The loaded version of `machine`, loading it when it is not. */
  get(orgId: string, machine: string, versionId: string): Promise<VersionSandbox>;
  /** The version if it is loaded and healthy now (no waiting); else use get. */
  loaded(versionId: string): VersionSandbox | undefined;
  /** Moves a version that crashed its worker twice (with its org) to the quarantine worker; undefined if it was there. */
  quarantineVersion(versionId: string, cause: 'crash'): { orgId: string | undefined } | undefined;
  /** Unloads the versions nobody asked for since `before`, except those in `inUse`; returns those that went. */
  unloadUnusedSince(before: number, inUse: Set<string>): string[];
  /** Forgets a version that no longer exists and frees its isolate. */
  unload(versionId: string): void;
  /** What the sandbox workers hold (null: that worker does not run). */
  stats(): Promise<{ main: WorkerStats | null; quarantine: WorkerStats | null }>;
}
