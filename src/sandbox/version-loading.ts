/**
 * Loading a machine version (or a migration bundle) into a new isolate: creates it with its limits,
 * installs the globals, evaluates the bundle (top-level code runs under the CPU limit) and inspects its
 * exports, with the checks smply's validate-bundle makes (wire-protocol §7.1, §7.5). What it hands
 * back is what a VersionIsolate (version-isolate.ts) is made of.
 */
import { randomBytes } from 'node:crypto';
import ivm from 'isolated-vm';
import { BundleValidationError, MachineCodeError, SandboxTimeoutError } from './errors.js';
import { IsolateModules } from './module-loader.js';
import { cryptoCallback, fetchCallback, logCallback, LogBudget, randomCallback } from './host-callbacks.js';
import { callSync, translateIsolateError, type CallArg, type CallLimits } from './isolate-call.js';
import { HostCalls } from './host-calls.js';
import { defaultEgressOptions, type EgressOptions, type Lookup } from './egress-policy.js';
import {
  FETCH_SOURCE,
  ENCODING_SOURCE,
  GLOBALS_SOURCE,
  STRUCTURED_CLONE_SOURCE,
  type HarnessFn,
  SUBTLE_SOURCE,
  TAMPERED_MARKER,
  URL_SOURCE,
  isolateSettings,
  untampered,
} from './isolate-sources.js';
import type { CapturedLog } from './types.js';

const DEFAULT_MEMORY_LIMIT_MB = 128;
const DEFAULT_CPU_LIMIT_MS = 1000;

export interface LoadOptions {
  versionId: string;
  code: string;
  /** What machine code may use in one call (and the limit its memory errors name). */
  memoryLimitMb?: number;
  /**
   * Room for the live actors on top of `memoryLimitMb` (default 0: they share it). The isolate's V8
   * heap limit is the sum, so a call's machine code has its own limit whatever the live actors hold;
   * keeping them within their part is the runtime's job (worker/live-heap-watch.ts).
   */
  liveActorMemoryMb?: number;
  cpuLimitMs?: number;
  onLog?: (entry: CapturedLog) => void;
  /** Where machine code's fetch may go and its limits; default: no allow-list, 10 s, 5 MB. */
  egress?: EgressOptions;
  /** DNS resolution for fetch (tests); default node:dns lookup of all addresses. */
  dnsLookup?: Lookup;
  /**
   * Runs each delivery of a host call's outcome, which runs machine code outside any request (the
   * sandbox worker times it for its stall watchdog); default: runs it as is.
   */
  aroundDelivery?: (deliver: () => void) => void;
  /**
   * Runs each synchronous call of the load that runs the bundle's code on this thread (binding its
   * exports to the harness, reading its machine), which the sandbox worker times for its stall
   * watchdog; default: runs it as is. (The top-level code runs off this thread, asynchronously.)
   */
  aroundMachineCode?: <T>(run: () => T) => T;
  /**
   * Let the actors of a machine that can leave nothing running but delayed events to itself rest
   * between steps as their state and timers alone, stepped by xstate's pure transition
   * (isolate/harness-pure-steps.js); default true.
   */
  pureSteps?: boolean;
  /** A machine version (the default) or a migration bundle, whose exports are checked instead. */
  kind?: 'version' | 'migration';
}

/** What the bundle exports, as seen by the harness. */
export interface BundleInfo {
  /** Set when the exports could not be read at all (then nothing else is). */
  loadError?: string;
  hasDefault: boolean;
  machine: 'v4' | 'v5' | 'none';
  definitionError: string | null;
  allowRead: boolean;
  allowWrite: boolean;
  /** A migration bundle's functions (wire-protocol §7.5). */
  upgradeState?: boolean;
  upgradeContext?: boolean;
}

/** Why a migration bundle cannot be used, or undefined when it can. */
function migrationProblem(info: BundleInfo): string | undefined {
  if (typeof info.loadError === 'string') return info.loadError;
  if (!info.upgradeState) return 'upgradeState must be an exported function: upgradeState(oldStatePath, context) → newStatePath';
  if (!info.upgradeContext)
    return 'upgradeContext must be an exported function: upgradeContext(oldStatePaths, newStatePaths, oldContext) → newContext';
  return undefined;
}

type Fn = ivm.Reference<(...args: CallArg[]) => unknown>;
const HARNESS_EXPORTS = [
  'start',
  'authorizeAndStart',
  'send',
  'authorizeAndSend',
  'advance',
  'stopChildren',
  'stop',
  'collect',
  'recover',
  'inspect',
  'defaultContext',
  'definition',
  'authorize',
  'authorizeReads',
  'deliver',
  'afterDeliver',
  'takeDroppedLogs',
  'configure',
  'census',
  'httpCall',
  'httpCollect',
  'httpDrop',
  'migrate',
  'rememberedPaths5',
] as const satisfies readonly HarnessFn[];
export type HarnessRefs = Record<(typeof HARNESS_EXPORTS)[number], Fn>;

/** The checks smply's validate-bundle makes (wire-protocol §7.1), as one message or undefined. */
function bundleProblem(info: BundleInfo): string | undefined {
  if (typeof info.loadError === 'string') return info.loadError;
  if (!info.hasDefault) return 'the bundle has no default export: it must `export default` an XState machine';
  if (info.machine !== 'v4' && info.machine !== 'v5') {
    return "the bundle's default export is not an XState machine: expected the result of createMachine from xstate 4 (an object with __xstatenode) or xstate 5 (a StateMachine, with getInitialSnapshot, transition and root)";
  }
  if (info.definitionError !== null) {
    return info.machine === 'v4'
      ? `the bundle's default export is not a usable XState v4 machine: reading machine.definition failed with ${info.definitionError}`
      : `the bundle's default export is not a usable XState v5 machine: ${info.definitionError}`;
  }
  if (!info.allowRead) return 'allowRead must be an exported function';
  if (!info.allowWrite) return 'allowWrite must be an exported function';
  return undefined;
}

/** A loaded isolate, with what its VersionIsolate needs; its host calls are not `ready` yet. */
export interface LoadedVersion {
  isolate: ivm.Isolate;
  context: ivm.Context;
  fns: HarnessRefs;
  limits: CallLimits;
  /** What the harness saw in the bundle (the load succeeded only if it raised no problem). */
  info: BundleInfo;
  hostCalls: HostCalls;
  logs: LogBudget;
}

/**
 * Creates the isolate, installs the globals, evaluates the bundle and checks its exports. Throws
 * BundleValidationError for unusable code; on any failure the isolate is gone.
 */
export async function loadVersion(opts: LoadOptions): Promise<LoadedVersion> {
  const limits: CallLimits = {
    memoryLimitMb: opts.memoryLimitMb ?? DEFAULT_MEMORY_LIMIT_MB,
    cpuLimitMs: opts.cpuLimitMs ?? DEFAULT_CPU_LIMIT_MS,
  };
  const isolate = new ivm.Isolate({ memoryLimit: limits.memoryLimitMb + (opts.liveActorMemoryMb ?? 0) });
  const hostCalls = new HostCalls(opts.egress ?? defaultEgressOptions, opts.dnsLookup);
  const logs = new LogBudget(opts.versionId, opts.onLog);
  try {
    const context = await isolate.createContext();
    installGlobals(isolate, context, logs, hostCalls);
    const modules = new IsolateModules(isolate, context);
    const bundle = modules.compileBundle(opts.code);
    const harness = modules.loadHarness(limits.cpuLimitMs);
    const fns = {} as HarnessRefs;
    for (const name of HARNESS_EXPORTS) {
      fns[name] = harness.namespace.getSync(name, { reference: true }) as Fn;
    }
    logs.countIsolateDrops = () => (isolate.isDisposed ? 0 : Number(callSync(isolate, fns.takeDroppedLogs, [], limits)));
    if (modules.bundleImportsXstate5) modules.bindXstate5(limits.cpuLimitMs);
    modules.instantiateBundle();
    logs.begin();
    try {
      await evaluateBundle(bundle, isolate, limits);
    } finally {
      logs.end();
    }
    const machineCode = opts.aroundMachineCode ?? ((run) => run());
    // (binding reads the default export's members: getters or a Proxy of the bundle's can run there)
    machineCode(() => {
      try {
        modules.bindEntry(limits.cpuLimitMs);
      } catch (e) {
        throw translateIsolateError(e, isolate, limits);
      }
    });
    let infoJson: string;
    logs.begin();
    try {
      infoJson = machineCode(() => callSync(isolate, fns.inspect, [], limits));
    } finally {
      logs.end();
    }
    const info = JSON.parse(infoJson) as BundleInfo;
    // A machine of a bundled xstate 5 copy runs on the shared v5 copy's actors (isolate/harness-v5.js).
    if (opts.kind !== 'migration' && info.machine === 'v5' && !modules.bundleImportsXstate5) modules.bindXstate5(limits.cpuLimitMs);
    const problem = opts.kind === 'migration' ? migrationProblem(info) : bundleProblem(info);
    if (problem !== undefined) throw new BundleValidationError(problem);
    if (opts.pureSteps === false) callSync(isolate, fns.configure, [JSON.stringify({ pureSteps: false })], limits);
    return { isolate, context, fns, limits, info, hostCalls, logs };
  } catch (e) {
    hostCalls.close();
    if (!isolate.isDisposed) isolate.dispose();
    // The bundle's top-level code tampered with what the harness relies on (see enterCall).
    if (e instanceof MachineCodeError && e.message.includes(TAMPERED_MARKER))
      throw new BundleValidationError(`the bundle's top-level code ${untampered(e.message).replace(/^machine code /, '')}`);
    throw e;
  }
}

function installGlobals(isolate: ivm.Isolate, context: ivm.Context, logs: LogBudget, hostCalls: HostCalls): void {
  const runInstaller = (source: string, filename: string, args: (ivm.Callback | string)[]): void => {
    const fn = isolate.compileScriptSync(source, { filename }).runSync(context, { reference: true }) as ivm.Reference<
      (...a: (ivm.Callback | string)[]) => void
    >;
    fn.applySync(undefined, args);
    fn.release();
  };
  const nonce = randomBytes(6).toString('hex');
  runInstaller(GLOBALS_SOURCE, 'file:///statehold/globals.js', [logCallback(logs), randomCallback(), nonce, isolateSettings()]);
  // (these three take nothing from the host; url.js encodes with encoding.js's TextEncoder)
  for (const [source, name] of [
    [ENCODING_SOURCE, 'encoding.js'],
    [STRUCTURED_CLONE_SOURCE, 'structured-clone.js'],
    [URL_SOURCE, 'url.js'],
  ] as const)
    isolate.compileScriptSync(source, { filename: `file:///statehold/${name}` }).runSync(context);
  runInstaller(FETCH_SOURCE, 'file:///statehold/fetch.js', [fetchCallback(hostCalls.start)]);
  runInstaller(SUBTLE_SOURCE, 'file:///statehold/subtle.js', [cryptoCallback()]);
}

const NOT_AN_ERROR = /^An object was thrown from supplied code within isolated-vm, but that object was not an instance of `Error`/;

async function evaluateBundle(bundle: ivm.Module, isolate: ivm.Isolate, limits: CallLimits): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    // top-level await on something that never settles (e.g. a host-clock timer) must not hang the load
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new BundleValidationError("the bundle's top-level code did not finish (top-level await never settled)")),
        limits.cpuLimitMs + 5000,
      );
    });
    await Promise.race([bundle.evaluate({ timeout: limits.cpuLimitMs }), stuck]);
  } catch (e) {
    if (e instanceof BundleValidationError) throw e;
    const t = translateIsolateError(e, isolate, limits);
    if (t instanceof SandboxTimeoutError) {
      throw new BundleValidationError(`the bundle's top-level code exceeded the CPU time limit of ${limits.cpuLimitMs} ms`);
    }
    if (t instanceof MachineCodeError) {
      // isolated-vm's words for a thrown object or symbol, which it cannot copy out, name it and not the bundle.
      const what = NOT_AN_ERROR.test(t.message) ? 'a value that is not an Error (an object or a symbol)' : t.message;
      throw new BundleValidationError(`the bundle threw while loading: ${what}`);
    }
    throw t;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
