/** The sandbox layer: isolated-vm hosting of machine versions (design.md §5). */
export { VersionIsolate, type MigrationInput, type MigrationOutput } from './version-isolate.js';
export { defaultEgressOptions, parseAllowList } from './egress-policy.js';
export type { EgressOptions } from './egress-policy.js';
export { validateBundle } from './bundle-validation.js';
export * from './errors.js';
export { childStoppedEvent, restoredSnapshot } from './snapshot.js';
export type * from './types.js';
export { SandboxClient } from './worker/sandbox-client.js';
export { RemoteVersion } from './worker/remote-version.js';
export { SandboxCrashedError, defaultWorkerNodeArgs } from './worker/worker-lifecycle.js';
export type { Stall } from './worker/worker-lifecycle.js';
export type { LoadSettings, WorkerStats } from './worker/protocol.js';
export type { LiveHeapReport } from './worker/sandbox-client.js';
