/**
 * Messages between the node and its sandbox worker process (design.md §5: isolates live where a V8
 * crash costs a worker restart, not the node). One ordered IPC channel each way; plain data only.
 * Each side sends what it has ready in one IPC message, a batch (an array, in order): a crossing
 * costs a write, a read and a wake-up of the other process, which on this kind of host is the larger
 * part of the cost of a small request.
 */
import type { EgressOptions } from '../egress-policy.js';
import type { MigrationInput } from '../version-isolate.js';
import type {
  AuthorizingCaller,
  CapturedLog,
  HttpApiRequest,
  HttpApiSettled,
  PersistedSnapshot,
  ReadManyRequest,
  ReadRequest,
  Restore,
  StartInit,
  StartOptions,
  WriteRequest,
} from '../types.js';

export interface LoadSettings {
  /** What machine code may use in one call, beyond what the live actors hold. */
  memoryLimitMb: number;
  /** What the isolate's live actors may hold (live-heap-watch.ts); the isolate's heap limit is the sum of the two. */
  liveActorMemoryMb: number;
  cpuLimitMs: number;
  egress: EgressOptions;
  /** See LoadOptions.pureSteps. */
  pureSteps: boolean;
}

export type SandboxRequest =
  /** `versionNo`: the node's number for this load, which a stall report names (stall-watchdog.ts). */
  | { op: 'load'; versionId: string; versionNo: number; code: string; settings: LoadSettings }
  | { op: 'validate'; code: string; settings: LoadSettings }
  | { op: 'validateMigration'; code: string; settings: LoadSettings }
  /** A migration bundle's functions over an instance's paths and context (an upgrade), in a throw-away isolate. */
  | { op: 'migrate'; code: string; input: MigrationInput; settings: LoadSettings; logTag?: string }
  /** The paths a v5 instance's history states remember, resolved by its version's machine (an upgrade). */
  | { op: 'rememberedPaths5'; versionId: string; snapshot: PersistedSnapshot }
  /** The machine's states and transitions as plain data (VersionIsolate.definition), for the web console. */
  | { op: 'definition'; versionId: string }
  | { op: 'allowRead'; versionId: string; request: ReadRequest }
  | { op: 'allowReads'; versionId: string; request: ReadManyRequest }
  | { op: 'allowWrite'; versionId: string; request: WriteRequest }
  | { op: 'start'; versionId: string; key: string; init: StartInit; options: StartOptions }
  /** allowWrite (`request`, an initialization) and, when it allows, the start: one round trip. */
  | { op: 'startAuthorized'; versionId: string; key: string; init: StartInit; options: StartOptions; request: WriteRequest }
  /** `restore`: the actor is not live in the isolate; it is restored from this in the same call. */
  | { op: 'send'; versionId: string; key: string; event: { type: string; [k: string]: unknown }; now: number; restore?: Restore }
  | {
      op: 'sendAuthorized';
      versionId: string;
      key: string;
      caller: AuthorizingCaller;
      event: { type: string; [k: string]: unknown };
      now: number;
      restore?: Restore;
    }
  | { op: 'advance'; versionId: string; key: string; now: number; restore?: Restore }
  | { op: 'stopChildren'; versionId: string; key: string }
  /** httpApiMapper[slug].handler(request), waiting up to deadlineMs for it when it is async. */
  | { op: 'httpApiHandler'; versionId: string; slug: string; request: HttpApiRequest; deadlineMs: number }
  /** httpApiMapper[slug].responseMapper({ state, context, result }) for a settled instance. */
  | { op: 'httpApiResponse'; versionId: string; slug: string; settled: HttpApiSettled; deadlineMs: number }
  | { op: 'stop'; versionId: string; key: string }
  /** The version is gone (its machine was deleted): free its isolate. */
  | { op: 'unload'; versionId: string }
  /** What the worker holds: its memory and each isolate's heap and live actors (GET /stats). */
  | { op: 'stats' };

/** The request of operation `Op`, whose fields are what a caller hands over for it (remote-version.ts). */
export type RequestOf<Op extends SandboxRequest['op']> = Extract<SandboxRequest, { op: Op }>;

export interface WorkerStats {
  /** The RSS of the process the isolates run in: the node's own with `--sandbox inline` (then `inNodeProcess`). */
  rssBytes: number;
  inNodeProcess?: true;
  isolates: { versionId: string; heapUsedBytes: number; resting: number; interpreters: number }[];
}

/** A typed sandbox error, rebuilt on the node's side by name. */
export interface SerializedError {
  name: string;
  message: string;
  limitMs?: number;
  limitMb?: number;
}

export type WorkerMessage =
  | { kind: 'response'; id: number; ok: true; value: unknown }
  | { kind: 'response'; id: number; ok: false; error: SerializedError }
  | { kind: 'log'; versionId: string; entry: CapturedLog }
  /** A host call (fetch) of the version's isolate completed; `seq` counts them. */
  | { kind: 'activity'; versionId: string; seq: number }
  /** The version's isolate is gone (memory limit): load it again to go on. */
  | { kind: 'unhealthy'; versionId: string }
  /**
   * What the version's live actors hold of its isolate's heap (live-heap-watch.ts): over their budget,
   * the node caps how many may be live there and evicts its least recently used ones; back within it
   * after that, the cap goes.
   */
  | { kind: 'live-heap'; versionId: string; heldBytes: number; budgetBytes: number };

/** `id` 0: a notice nothing waits for (a stop, an unload); the worker does not answer it. */
export type NodeMessage = { id: number; request: SandboxRequest };

/** What crosses the channel: the messages one side had ready, oldest first. */
export type Batch<T> = T[];

/** The error name a retired worker answers with for requests it did not run (stall-watchdog.ts). */
export const MOVED_ERROR = 'SandboxMovedError';

/**
 * The worker's file descriptor of the pipe its stall watchdog reports on (the fork's stdio: ignore,
 * inherit, inherit, ipc, then this pipe). One JSON line per report.
 */
export const REPORT_FD = 4;

/** What a worker is told on its command line: its role (for `ps`) and its stall limit (0: no watchdog). */
interface WorkerArgs {
  role: string;
  stallMs: number;
}

export const workerArgs = ({ role, stallMs }: WorkerArgs): string[] => [role, `stall-ms=${stallMs}`];

export const parseWorkerArgs = (argv: string[]): WorkerArgs => {
  const stall = argv.find((arg) => arg.startsWith('stall-ms='));
  return { role: argv[0] ?? 'main', stallMs: stall ? Number(stall.slice('stall-ms='.length)) || 0 : 0 };
};
