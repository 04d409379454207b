/**
 * A scripted stand-in for the sandbox, for in-process tests of the runtime (test/runtime-*.test.ts):
 * machines are tiny state charts in plain TS (states, events, delayed events, a child that runs), and
 * every step answers with a StepResult made the way the real one is (the harness's three JSON texts,
 * through splitStep and parseStep, sandbox/step-result.ts), so a result the runtime could not get from
 * the real sandbox fails here too. No isolate, no worker: a step takes microseconds.
 */
import type {
  JsonObject,
  MachineEvent,
  OutboundSend,
  PendingTimer,
  Restore,
  StartInit,
  StartOptions,
  StepResult,
  WriteRequest,
} from '../../src/sandbox/types.js';
import { MachineCodeError } from '../../src/sandbox/errors.js';
import { parseStep, splitStep } from '../../src/sandbox/step-result.js';
import type { RuntimeSandboxes, VersionSandbox } from '../../src/runtime/runtime-sandboxes.js';

export interface FakeTransition {
  target?: string;
  /** The new context (replaces the old one). */
  assign?: (context: JsonObject, event: MachineEvent) => JsonObject;
  /** An event to another instance (`sendTo` a persistent ref). */
  sendTo?: { machine: string; name: string; event: MachineEvent };
  /** Machine code that throws: the step fails with a MachineCodeError. */
  throws?: string;
}

export interface FakeState {
  on?: Record<string, FakeTransition>;
  /** Delayed events armed on entry: after this many ms, the transition runs. */
  after?: Record<number, FakeTransition>;
  /** A child running while in this state; done `doneAfterMs` after entry (never, when absent), then `onDone`. */
  invoke?: { id: string; doneAfterMs?: number; onDone?: FakeTransition };
}

export interface FakeMachine {
  initial: string;
  context?: JsonObject;
  states: Record<string, FakeState>;
  /** allowWrite: every write is allowed when absent. */
  allowWrite?: (request: WriteRequest) => boolean;
  /** How long each step takes, in ms of real time (to let concurrent calls interleave); 0 by default. */
  stepDelayMs?: () => number;
}

interface Live {
  value: string;
  context: JsonObject;
  timers: PendingTimer[];
  child?: { id: string; doneAt: number | undefined };
  sends: OutboundSend[];
  transitions: number;
}

const afterEvent = (state: string, ms: number): MachineEvent => ({ type: `xstate.after(${ms})#fake.${state}` });

/** One loaded version of a fake machine; what the runtime calls, and counts of what it was asked. */
export class FakeVersion implements VersionSandbox {
  readonly healthy = true;
  readonly activitySeq = 0;
  private readonly actors = new Map<string, Live>();
  /** Calls by name, for tests that check what reached the sandbox. */
  readonly calls: string[] = [];

  constructor(
    readonly versionId: string,
    private readonly machine: FakeMachine,
  ) {}

  nextActivity(): Promise<void> {
    return Promise.resolve();
  }

  rememberedPaths5(): Promise<string[][]> {
    return Promise.resolve([]);
  }

  allowRead(): Promise<boolean> {
    return Promise.resolve(true);
  }

  allowReads(request: { authContexts: JsonObject[] }): Promise<boolean[]> {
    return Promise.resolve(request.authContexts.map(() => true));
  }

  allowWrite(request: WriteRequest): Promise<boolean> {
    this.calls.push('allowWrite');
    return Promise.resolve(this.machine.allowWrite?.(request) ?? true);
  }

  async start(key: string, init: StartInit, options: StartOptions): Promise<StepResult> {
    this.calls.push('start');
    await this.pause();
    const now = options.nowMs ?? 0;
    if ('snapshot' in init) {
      const state = init.snapshot.state as { value: string; context: JsonObject };
      const live: Live = { value: state.value, context: state.context, timers: init.pendingTimers ?? [], sends: [], transitions: 0 };
      this.actors.set(key, live);
      return this.result(live);
    }
    const live: Live = {
      value: this.machine.initial,
      context: { ...this.machine.context, ...init.context },
      timers: [],
      sends: [],
      transitions: 0,
    };
    this.enter(live, now);
    this.actors.set(key, live);
    return this.result(live);
  }

  async startAuthorized(key: string, init: StartInit, options: StartOptions, request: WriteRequest): Promise<StepResult | 'rejected'> {
    if (!(await this.allowWrite(request))) return 'rejected';
    return this.start(key, init, options);
  }

  async send(key: string, event: MachineEvent, now: number, restore?: Restore): Promise<StepResult> {
    this.calls.push(`send ${event.type}`);
    await this.pause();
    const live = this.live(key, restore);
    this.take(live, event, now);
    return this.result(live);
  }

  async sendAuthorized(
    key: string,
    caller: { machineInstanceName: string; authContext: JsonObject },
    event: MachineEvent,
    now: number,
    restore?: Restore,
  ): Promise<StepResult | 'rejected'> {
    const live = this.live(key, restore);
    const request: WriteRequest = { type: 'event', ...caller, state: live.value, context: live.context, event };
    if (!(await this.allowWrite(request))) return 'rejected';
    return this.send(key, event, now);
  }

  async advance(key: string, now: number, restore?: Restore): Promise<StepResult> {
    this.calls.push(`advance ${now}`);
    await this.pause();
    const live = this.live(key, restore);
    for (;;) {
      const timer = live.timers
        .filter((t): t is Extract<PendingTimer, { kind: 'event' }> => t.kind === 'event' && t.dueAt <= now)
        .sort((a, b) => a.dueAt - b.dueAt)[0];
      const childDone = live.child?.doneAt !== undefined && live.child.doneAt <= now ? live.child.doneAt : undefined;
      if (!timer && childDone === undefined) break;
      if (timer && (childDone === undefined || timer.dueAt <= childDone)) {
        live.timers = live.timers.filter((t) => t.id !== timer.id);
        this.take(live, timer.event, timer.dueAt);
      } else if (live.child) {
        const { id } = live.child;
        live.child = undefined;
        this.take(live, { type: `done.invoke.${id}` }, childDone ?? now);
      }
    }
    return this.result(live);
  }

  stopChildren(key: string): Promise<{ id: string }[]> {
    this.calls.push('stopChildren');
    const live = this.actors.get(key);
    const child = live?.child;
    if (live) live.child = undefined;
    return Promise.resolve(child ? [{ id: child.id }] : []);
  }

  stop(key: string): void {
    this.calls.push('stop');
    this.actors.delete(key);
  }

  private async pause(): Promise<void> {
    const ms = this.machine.stepDelayMs?.() ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  }

  private live(key: string, restore: Restore | undefined): Live {
    if (restore) {
      const live: Live = {
        value: restore.value as string,
        context: restore.context,
        timers: restore.pendingTimers ?? [],
        sends: [],
        transitions: 0,
      };
      this.actors.set(key, live);
      return live;
    }
    const live = this.actors.get(key);
    if (!live) throw new Error(`fake sandbox: actor ${key} is not live and no restore was given`);
    return live;
  }

  private take(live: Live, event: MachineEvent, now: number): void {
    const state = this.machine.states[live.value];
    const afterMs = Object.keys(state?.after ?? {})
      .map(Number)
      .find((ms) => afterEvent(live.value, ms).type === event.type);
    const invokeDone = state?.invoke && event.type === `done.invoke.${state.invoke.id}` ? state.invoke.onDone : undefined;
    const transition = afterMs !== undefined ? state?.after?.[afterMs] : (invokeDone ?? state?.on?.[event.type]);
    if (!transition) return;
    if (transition.throws !== undefined) throw new MachineCodeError(transition.throws);
    if (transition.assign) live.context = transition.assign(live.context, event);
    if (transition.sendTo) {
      const { machine, name, event: sent } = transition.sendTo;
      live.sends.push({ to: { type: 'statebacked.instance', machineName: machine, machineInstanceName: name }, event: sent });
    }
    live.transitions++;
    if (transition.target !== undefined) {
      live.value = transition.target;
      this.enter(live, now);
    }
  }

  /** Entering a state: the old state's delayed events and child go, the new one's are armed. */
  private enter(live: Live, now: number): void {
    const state = this.machine.states[live.value];
    live.timers = Object.keys(state?.after ?? {}).map((ms) => {
      const event = afterEvent(live.value, Number(ms));
      return { kind: 'event', id: event.type, dueAt: now + Number(ms), event, sendId: event.type };
    });
    live.child = state?.invoke
      ? { id: state.invoke.id, doneAt: state.invoke.doneAfterMs === undefined ? undefined : now + state.invoke.doneAfterMs }
      : undefined;
  }

  /** The step's result as the harness would hand it over (three JSON texts), parsed as the host parses it. */
  private result(live: Live): StepResult {
    const rest = {
      state: live.value,
      tags: [],
      done: false,
      changed: live.transitions > 0,
      pendingTimers: live.timers,
      runningChildren: live.child ? [{ id: live.child.id, kind: 'promise' }] : [],
      persistentSpawns: [],
      outboundSends: live.sends,
      transitions: live.transitions,
    };
    const snapshot = { xstate: 4, state: { value: live.value, context: live.context } };
    live.sends = [];
    live.transitions = 0;
    const raw = splitStep(`${JSON.stringify(rest)}\n${JSON.stringify(live.context)}\n${JSON.stringify(snapshot)}`, 0);
    if (!raw) throw new Error('fake sandbox: no step result');
    return parseStep(raw);
  }
}

/** The pool of fake versions, by version id: what InstanceRuntime gets as its `sandboxes`. */
export class FakeSandboxes implements RuntimeSandboxes {
  readonly versions = new Map<string, FakeVersion>();

  constructor(machines: Record<string, FakeMachine>) {
    for (const [versionId, machine] of Object.entries(machines)) this.versions.set(versionId, new FakeVersion(versionId, machine));
  }

  version(versionId: string): FakeVersion {
    const version = this.versions.get(versionId);
    if (!version) throw new Error(`fake sandbox: no version ${versionId}`);
    return version;
  }

  get(_orgId: string, _machine: string, versionId: string): Promise<VersionSandbox> {
    return Promise.resolve(this.version(versionId));
  }

  loaded(versionId: string): VersionSandbox | undefined {
    return this.versions.get(versionId);
  }

  quarantineVersion(): undefined {
    return undefined;
  }

  unloadUnusedSince(): string[] {
    return [];
  }

  unload(): void {}

  stats(): Promise<{ main: null; quarantine: null }> {
    return Promise.resolve({ main: null, quarantine: null });
  }
}
