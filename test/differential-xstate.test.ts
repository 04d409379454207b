/**
 * Differential test: generated machines (test/helpers/machine-generator.ts, drawn by fast-check from
 * a seed) run on statehold and on the test process's own xstate. After every event the service's
 * answer (state, public context, tags, done) and its admin view (state, full context) must be what
 * xstate says, and at the end each instance's history (GET .../events) must hold xstate's steps.
 * Each machine is uploaded four ways: XState v4 and v5, each bundled in with esbuild as smply does
 * and importing the service's copy (`npm:xstate`, `npm:xstate@5`). Every upload runs on four nodes,
 * each disturbing its instances differently: the defaults (pure steps on), `--pure-steps off`,
 * `--max-live-actors 1` (two instances interleaved, so nearly every event restores its instance
 * from storage), and `--settle-timeout-ms 0` with one live actor (the node's durable timers deliver
 * delayed events to evicted instances, some across the restart). An answer never waits for delayed
 * events: it holds the state right after the event, and the admin state must then become what xstate
 * reaches once every delayed event fired (waited for a bounded while). Half way
 * through its events every instance is paused (an event must get 409 and change nothing) and
 * resumed, and every node is restarted on its data dir: the first with SIGTERM, the others after
 * SIGKILL.
 *
 * What machine code writes to the console (some actions, and every guard as it is evaluated, in a
 * third of the machines) must reach the instance's logs (GET /logs) once each, in xstate's order; a
 * refused event's lines too (its code ran). Across a restart after SIGKILL the lines before it may
 * be missing (logs are stored in batches, apart from commits), never repeated or out of order.
 *
 * The reference decides first: an event whose step throws in xstate must get 400 machine-code-error
 * and leave the instance as it was; an event after the machine is done changes nothing.
 *
 * Environment: STATEHOLD_DIFF_SEED (default below), STATEHOLD_DIFF_RUNS (machines, default 10),
 * STATEHOLD_DIFF_BATCH (machines between restarts, default 8), STATEHOLD_DIFF_EVENTS (events per
 * instance, default 12), STATEHOLD_DIFF_ONLY (case indices, comma-separated), STATEHOLD_DIFF_FLAVORS
 * (v4-bundled,v4-import,v5-bundled,v5-import), STATEHOLD_DIFF_SERVERS
 * (default,pure-steps-off,evicting,durable-timers). A failure prints the seed, the machine's source,
 * every instance's events and how to run that case alone. A long run needs tap's file timeout
 * raised: `STATEHOLD_DIFF_RUNS=200 STATEHOLD_DIFF_SEED=7 npx tap --timeout=7200
 * test/differential-xstate.test.ts` (a few seconds a machine on a 2-core host).
 */
import { isDeepStrictEqual } from 'node:util';
import { gzipSync } from 'node:zlib';
import { StateBackedClient } from '@statebacked/client';
import fc from 'fast-check';
import t from 'tap';
import * as xstate4 from 'xstate';
import { SimulatedClock as SimulatedClock4 } from 'xstate/lib/SimulatedClock.js';
import * as xstate5 from 'xstate5';
import { bundleLikeSmply } from './helpers/bundle.js';
import { removeDir, startNode, tempDataDir, type NodeProcess } from './helpers/node-process.js';
import {
  buildSpec,
  caseArbitrary,
  referenceRun,
  renderModule,
  type Expectation,
  type Features,
  type HistoryRecord,
  type MachineSpec,
  type Major,
  type Observed,
  type ReferenceRun,
  type XstateModules,
} from './helpers/machine-generator.js';

const env = process.env;
// The default seed's machines cover every feature the generator has (the last test below checks it):
// one that does is picked again when the generator changes what it draws (69 until 2026-11-29).
const SEED = Number(env.STATEHOLD_DIFF_SEED ?? 2);
const RUNS = Number(env.STATEHOLD_DIFF_RUNS ?? 10);
const BATCH = Math.max(1, Number(env.STATEHOLD_DIFF_BATCH ?? 8));
const EVENTS = Number(env.STATEHOLD_DIFF_EVENTS ?? 12);
const ONLY = env.STATEHOLD_DIFF_ONLY ? new Set(env.STATEHOLD_DIFF_ONLY.split(',').map(Number)) : undefined;
const listFilter = (value: string | undefined) => (value ? new Set(value.split(',')) : undefined);
const FLAVOR_FILTER = listFilter(env.STATEHOLD_DIFF_FLAVORS);
const SERVER_FILTER = listFilter(env.STATEHOLD_DIFF_SERVERS);

const xs: XstateModules = {
  v4: { ...(xstate4 as any), SimulatedClock: SimulatedClock4 },
  v5: xstate5 as any,
};

interface Flavor {
  name: string;
  major: Major;
  bundled: boolean;
}
const FLAVORS: Flavor[] = [
  { name: 'v4-bundled', major: 4, bundled: true },
  { name: 'v4-import', major: 4, bundled: false },
  { name: 'v5-bundled', major: 5, bundled: true },
  { name: 'v5-import', major: 5, bundled: false },
].filter((f) => !FLAVOR_FILTER || FLAVOR_FILTER.has(f.name)) as Flavor[];

interface ServerKind {
  name: string;
  args: string[];
  restartSignal: NodeJS.Signals;
  /**
   * `--settle-timeout-ms 0` and one live actor: the last event before the restart leaves its delayed
   * events pending across it (they must fire after the restart, or have fired before the kill).
   */
  durableTimers?: boolean;
}
const SERVER_KINDS: ServerKind[] = (
  [
    { name: 'default', args: [], restartSignal: 'SIGTERM' },
    { name: 'pure-steps-off', args: ['--pure-steps', 'off'], restartSignal: 'SIGKILL' },
    { name: 'evicting', args: ['--max-live-actors', '1'], restartSignal: 'SIGKILL' },
    { name: 'durable-timers', args: ['--settle-timeout-ms', '0', '--max-live-actors', '1'], restartSignal: 'SIGKILL', durableTimers: true },
  ] satisfies ServerKind[]
).filter((s) => !SERVER_FILTER || SERVER_FILTER.has(s.name));

// ---------------------------------------------------------------------------------------------
// The cases

const specifier = (major: Major) => (major === 4 ? 'npm:xstate' : 'npm:xstate@5');
/**
 * One draw, built for each major: v5 machines also get the corners xstate 4 itself answers
 * differently in once restored (several regions of a parallel state on one event, and regions writing
 * shared context), which xstate 5 answers alike live and restored (save where one of those handlers
 * targets a history state: kept out of both, see machine-generator.ts; machine-generator.test.ts
 * checks the generator against xstate alone). Each major's instances get the
 * events its machine handles.
 */
interface Case {
  index: number;
  specs: Map<Major, MachineSpec>;
  references: Map<Major, ReferenceRun[]>;
}

const raws = fc.sample(caseArbitrary({ minEvents: EVENTS - 2, maxEvents: EVENTS + 2, instances: 2 }), { seed: SEED, numRuns: RUNS });
const cases: Case[] = [];
for (const [index, raw] of raws.entries()) {
  if (ONLY && !ONLY.has(index)) continue;
  const specs = new Map<Major, MachineSpec>();
  const references = new Map<Major, ReferenceRun[]>();
  for (const major of new Set(FLAVORS.map((f) => f.major))) {
    const spec = buildSpec(raw, { regionConflicts: major === 5 || 'targetless' });
    specs.set(major, spec);
    const runs: ReferenceRun[] = [];
    for (const events of spec.instances) runs.push(await referenceRun(spec, major, events, xs));
    references.set(major, runs);
  }
  cases.push({ index, specs, references });
}

interface Upload {
  case: Case;
  flavor: Flavor;
  spec: MachineSpec;
  machine: string;
  /** What is shown on a failure: the module before bundling. */
  source: string;
  code: string;
}

const uploads: Upload[] = [];
for (const c of cases) {
  for (const flavor of FLAVORS) {
    const spec = c.specs.get(flavor.major) as MachineSpec;
    const source = renderModule(spec, flavor.major, flavor.bundled ? 'xstate' : specifier(flavor.major));
    // bundled the way smply 0.1.18 builds (wire-protocol §7.3), xstate inside; v5 as the xstate5 package
    const code = flavor.bundled ? await bundleLikeSmply(source, { xstate5: flavor.major === 5 }) : source;
    uploads.push({ case: c, flavor, spec, machine: `diff-${SEED}-${c.index}-${flavor.name}`, source, code });
  }
}

// ---------------------------------------------------------------------------------------------
// Driving a node

interface Mismatch {
  server: string;
  upload: Upload;
  instance: number;
  /** -1: the create request; -2: after the last event. */
  step: number;
  afterRestart: boolean;
  what: string;
  event?: unknown;
  expected: unknown;
  got: unknown;
}

const mismatches: Mismatch[] = [];
const where = (m: Pick<Mismatch, 'step'>): string =>
  m.step === -1 ? 'create' : m.step === -2 ? 'after the last event' : `event #${m.step}`;
/** `${server} ${machine}` of every upload driven to its end. */
const completed = new Set<string>();
/** What stopped a server's run before its end (a node that did not start, a request that failed outside the checks). */
const serverFailures = new Map<string, string>();
/** Log lines found as xstate wrote them (checkLogs), over every server. */
let logLinesChecked = 0;
/** How the service answered events sent after the machine was done, by flavor and answer ('200' or the error's status and code). */
const afterDoneAnswers = new Map<string, number>();

const answerOf = (o: Observed) => ({ state: o.value, publicContext: o.context.public, tags: o.tags, done: o.done });
const adminOf = (o: Observed) => ({ state: o.value, context: o.context });
const errorOf = (e: unknown) => {
  const err = e as { status?: number; code?: string; message?: string };
  return { status: err.status, code: err.code, message: err.message };
};

class Server {
  node!: NodeProcess;
  client!: StateBackedClient;
  readonly dataDir = tempDataDir();
  restarted = false;
  constructor(readonly kind: ServerKind) {}

  async start() {
    // A loaded 2-core host (make test runs two files at once) can take more than the helper's 20 s.
    this.node = await startNode({ dataDir: this.dataDir, args: this.kind.args, startTimeoutMs: 60_000 });
    this.client = new StateBackedClient(this.node.adminKey as string, { apiHost: this.node.url });
  }

  async restart() {
    await this.node.stop(this.kind.restartSignal);
    const before = this.node.output();
    try {
      await this.start();
    } catch (e) {
      throw new Error(
        `the restart after ${this.kind.restartSignal} failed: ${e instanceof Error ? e.message : String(e)}\nthe node before it said:\n${before.slice(-3000)}`,
      );
    }
    this.restarted = true;
  }

  async stop() {
    await this.node?.stop();
    removeDir(this.dataDir);
  }
}

/** One upload's instances on one server: the events go out round robin, each checked against the reference. */
class Drive {
  readonly broken: boolean[];
  readonly slugs: string[];
  /** Just before the machine was made: where its logs are read from. */
  private readonly since = new Date(Date.now() - 1_000).toISOString();
  constructor(
    readonly server: Server,
    readonly upload: Upload,
  ) {
    this.slugs = upload.spec.instances.map((_, i) => `i${i}`);
    this.broken = this.slugs.map(() => false);
  }

  get reference(): ReferenceRun[] {
    return this.upload.case.references.get(this.upload.flavor.major) as ReferenceRun[];
  }

  private fail(instance: number, step: number, what: string, expected: unknown, got: unknown) {
    this.broken[instance] = true;
    const event = step >= 0 ? this.upload.spec.instances[instance]?.[step] : undefined;
    const m: Mismatch = {
      server: this.server.kind.name,
      upload: this.upload,
      instance,
      step,
      afterRestart: this.server.restarted,
      what,
      event,
      expected,
      got,
    };
    mismatches.push(m);
    // At once too (a long run reports at its end): one line.
    t.comment(
      `mismatch: ${m.server} ${m.upload.machine} i${instance} ${where(m)}: ${what}; expected ${JSON.stringify(expected)}, got ${JSON.stringify(got)}`,
    );
  }

  private same(instance: number, step: number, what: string, expected: unknown, got: unknown): boolean {
    if (isDeepStrictEqual(JSON.parse(JSON.stringify(got ?? null)), expected)) return true;
    this.fail(instance, step, what, expected, got);
    return false;
  }

  private async checkAdmin(instance: number, step: number, expected: Observed, what = 'admin state') {
    const a = await this.server.client.machineInstances.admin.get(this.upload.machine, this.slugs[instance] as string);
    this.same(instance, step, what, adminOf(expected), { state: a.state, context: a.context });
  }

  async deploy() {
    const { client } = this.server;
    await client.machines.create(this.upload.machine);
    const code = this.upload.flavor.bundled ? { gzippedCode: gzipSync(this.upload.code) } : { code: this.upload.code };
    await client.machineVersions.create(this.upload.machine, { clientInfo: 'differential', makeCurrent: true, ...code });
  }

  /** The history records xstate made up to and including `step` (-1: the create). */
  private recordsThrough(instance: number, step: number): number {
    const ref = this.reference[instance] as ReferenceRun;
    return ref.initialRecords.length + ref.steps.slice(0, step + 1).reduce((n, s) => n + (s.kind === 'refused' ? 0 : s.records.length), 0);
  }

  private async history(instance: number): Promise<Array<{ event: { type: string }; state: unknown }>> {
    const got: Array<{ event: { type: string }; state: unknown }> = [];
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const r = await this.server.client.machineInstances.listTransitions(
        this.upload.machine,
        this.slugs[instance] as string,
        cursor ? { cursor } : undefined,
      );
      got.push(...(r.transitions as typeof got));
      cursor = (r as { cursor?: string }).cursor;
      if (!cursor) break;
    }
    return got;
  }

  /**
   * Waits (at most 5 s) until the instance's history has every record xstate made through `step`
   * (each delayed event that fired adds one: a state alone cannot tell whether one is still to
   * come), then checks its admin state.
   */
  async awaitState(instance: number, step: number, expected: Observed) {
    if (this.broken[instance]) return;
    const count = this.recordsThrough(instance, step);
    for (let i = 0; i < 250; i++) {
      if ((await this.history(instance)).length >= count) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await this.checkAdmin(instance, step, expected, 'admin state once the delayed events fired');
  }

  async create(instance: number) {
    const ref = this.reference[instance] as ReferenceRun;
    const expected = ref.initial;
    // (an answer does not wait for delayed events: it holds the state right after the event)
    const answered = ref.initialRecords[0]?.observed ?? expected;
    const context = this.upload.spec.createContext;
    try {
      const r = await this.server.client.machineInstances.create(this.upload.machine, {
        slug: this.slugs[instance] as string,
        ...(context ? { context } : {}),
      });
      if (
        !this.same(instance, -1, 'create answer', answerOf(answered), {
          state: r.state,
          publicContext: r.publicContext,
          tags: [...r.tags].sort(),
          done: r.done,
        })
      )
        return;
      await this.awaitState(instance, -1, expected);
    } catch (e) {
      this.fail(instance, -1, 'create failed', answerOf(expected), errorOf(e));
    }
  }

  private previous(instance: number, step: number): Observed {
    const ref = this.reference[instance] as ReferenceRun;
    return step === 0 ? ref.initial : (ref.steps[step - 1] as Expectation).state;
  }

  /** Pauses the instance, checks that an event is refused with 409 and changes nothing, and resumes it. */
  async pauseResume(instance: number, step: number) {
    if (this.broken[instance]) return;
    const { client } = this.server;
    const slug = this.slugs[instance] as string;
    const event = this.upload.spec.instances[instance]?.[step];
    if (event === undefined) return;
    try {
      await client.machineInstances.dangerously.setStatus(this.upload.machine, slug, { status: 'paused' });
      try {
        const r = await client.machineInstances.sendEvent(this.upload.machine, slug, { event });
        this.fail(instance, step, 'a paused instance took an event', { status: 409, code: 'invalid-state' }, r);
      } catch (e) {
        const err = errorOf(e);
        this.same(
          instance,
          step,
          'event to a paused instance',
          { status: 409, code: 'invalid-state' },
          { status: err.status, code: err.code },
        );
      }
      await this.checkAdmin(instance, step, this.previous(instance, step), 'admin state while paused');
      await client.machineInstances.dangerously.setStatus(this.upload.machine, slug, { status: 'running' });
    } catch (e) {
      this.fail(instance, step, 'pause/resume failed', 'pause, 409, resume', errorOf(e));
    }
  }

  /** The instance's whole history (`GET .../events`, every page) against the reference's records. */
  async checkHistory(instance: number) {
    if (this.broken[instance]) return;
    const ref = this.reference[instance] as ReferenceRun;
    const expected: HistoryRecord[] = [...ref.initialRecords, ...ref.steps.flatMap((s) => (s.kind === 'refused' ? [] : s.records))];
    const got = await this.history(instance);
    const shown = got.map((g, i) => ({ event: expected[i]?.full === false ? { type: g.event.type } : g.event, state: g.state }));
    this.same(
      instance,
      -2,
      'history (GET .../events) after the last event',
      expected.map((e) => ({ event: e.event, state: e.state })),
      shown,
    );
  }

  /** Machine code's console lines for the instance (GET /logs, every page); the service's own lines left out. */
  private async logLines(instance: number): Promise<string[]> {
    const lines: string[] = [];
    let from = this.since;
    for (let page = 0; page < 100; page++) {
      const r = await this.server.client.logs.retrieve(new Date(from), {
        machineName: this.upload.machine,
        instanceName: this.slugs[instance] as string,
      });
      for (const entry of r.logs) for (const line of entry.log.split('\n')) if (/^[LG] /.test(line)) lines.push(line);
      if (r.logs.length === 0 || r.maxTimestamp === from) break;
      from = r.maxTimestamp;
    }
    return lines;
  }

  /**
   * The instance's logs against the lines xstate's run wrote: `restartedAt` is the first step after
   * the node's restart. After SIGTERM every line must be there; after SIGKILL the lines written before
   * it may be missing, in part (not yet stored), but never repeated or out of order.
   */
  async checkLogs(instance: number, restartedAt: number) {
    if (this.broken[instance]) return;
    const ref = this.reference[instance] as ReferenceRun;
    const before = [...ref.initialLogs, ...ref.steps.slice(0, restartedAt).flatMap((s) => s.logs)];
    const after = ref.steps.slice(restartedAt).flatMap((s) => s.logs);
    const lossy = this.server.kind.restartSignal === 'SIGKILL';
    const fits = (got: string[]): boolean => {
      if (!lossy) return isDeepStrictEqual(got, [...before, ...after]);
      if (got.length < after.length || !isDeepStrictEqual(got.slice(got.length - after.length), after)) return false;
      let at = 0;
      for (const line of got.slice(0, got.length - after.length)) {
        while (at < before.length && before[at] !== line) at++;
        if (at++ >= before.length) return false;
      }
      return true;
    };
    // (stored in batches, and on a cluster through the LOGS stream: a little after the step; a loaded
    // host can take seconds, and only a check that does not pass waits the whole 10 s)
    let got: string[] = [];
    for (let i = 0; i < 200; i++) {
      got = await this.logLines(instance);
      if (fits(got)) {
        logLinesChecked += got.length;
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    this.same(instance, -2, lossy ? 'logs (the lines before the SIGKILL may be missing)' : 'logs', [...before, ...after], got);
  }

  /**
   * The answer holds the state right after the event (delayed events do not hold it: the durable timers
   * deliver them); then the admin state once they fired. `wait: false` leaves them pending: the caller
   * awaits the state later.
   */
  async step(instance: number, step: number, wait = true) {
    if (this.broken[instance]) return;
    const event = this.upload.spec.instances[instance]?.[step];
    const expected = (this.reference[instance] as ReferenceRun).steps[step];
    if (event === undefined || expected === undefined) return;
    const { client } = this.server;
    const slug = this.slugs[instance] as string;
    let answer: unknown;
    let error: ReturnType<typeof errorOf> | undefined;
    try {
      const r = await client.machineInstances.sendEvent(this.upload.machine, slug, { event });
      answer = { state: r.state, publicContext: r.publicContext, tags: [...r.tags].sort(), done: r.done };
    } catch (e) {
      error = errorOf(e);
    }
    if (expected.kind === 'ok') {
      const answered = expected.records[0]?.observed ?? expected.state;
      if (error) return this.fail(instance, step, 'event refused', answerOf(answered), error);
      if (!this.same(instance, step, 'answer (before the delayed events)', answerOf(answered), answer)) return;
      if (wait) await this.awaitState(instance, step, expected.state);
      return;
    } else if (expected.kind === 'refused') {
      if (!error)
        return this.fail(
          instance,
          step,
          `event taken although xstate threw (${expected.error})`,
          { status: 400, code: 'machine-code-error' },
          answer,
        );
      if (
        !this.same(
          instance,
          step,
          `refusal (xstate threw ${expected.error})`,
          { status: 400, code: 'machine-code-error' },
          { status: error.status, code: error.code },
        )
      )
        return;
    } else {
      // The machine is done: whatever the answer, the instance must not change.
      const key = `${this.upload.flavor.name}: ${error ? `${error.status} ${error.code}` : '200'}`;
      afterDoneAnswers.set(key, (afterDoneAnswers.get(key) ?? 0) + 1);
      if (answer !== undefined && !this.same(instance, step, 'answer after done', answerOf(expected.state), answer)) return;
    }
    await this.checkAdmin(instance, step, expected.state);
  }
}

const servers = SERVER_KINDS.map((k) => new Server(k));
t.teardown(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

/** Everything one server does: batches of uploads, each driven half way, the server restarted, the rest driven. */
const runServer = async (server: Server) => {
  const began = Date.now();
  await server.start();
  for (let from = 0; from < cases.length; from += BATCH) {
    const batch = new Set(cases.slice(from, from + BATCH));
    const drives = uploads.filter((u) => batch.has(u.case)).map((u) => new Drive(server, u));
    const half = (d: Drive, i: number) => Math.floor((d.upload.spec.instances[i]?.length ?? 0) / 2);
    // With durable timers, each upload's last event before the restart leaves its delayed events pending
    // across it: they must fire after the restart (or have fired before the kill), to the same state.
    const pending: Array<() => Promise<void>> = [];
    for (const d of drives) {
      await d.deploy();
      for (let i = 0; i < d.slugs.length; i++) await d.create(i);
      const longest = Math.max(...d.slugs.map((_, i) => half(d, i)));
      for (let s = 0; s < longest; s++) {
        for (let i = 0; i < d.slugs.length; i++) {
          if (s >= half(d, i)) continue;
          const last = s === half(d, i) - 1 && server.kind.durableTimers === true;
          await d.step(i, s, !last);
          const expected = d.reference[i]?.steps[s];
          if (last && expected) pending.push(() => d.awaitState(i, s, expected.state));
        }
      }
    }
    await server.restart();
    for (const awaitIt of pending) await awaitIt();
    t.comment(
      `${server.kind.name}: machines ${from + 1}-${from + batch.size} driven half way, node restarted (${server.kind.restartSignal}); ${mismatches.length} mismatches so far`,
    );
    for (const d of drives) {
      await d.pauseResume(0, half(d, 0));
      const longest = Math.max(...d.upload.spec.instances.map((e) => e.length));
      for (let s = 0; s < longest; s++) for (let i = 0; i < d.slugs.length; i++) if (s >= half(d, i)) await d.step(i, s);
      for (let i = 0; i < d.slugs.length; i++) await d.checkHistory(i);
      for (let i = 0; i < d.slugs.length; i++) await d.checkLogs(i, half(d, i));
      completed.add(`${server.kind.name} ${d.upload.machine}`);
    }
  }
  t.comment(`${server.kind.name}: done in ${((Date.now() - began) / 1000).toFixed(1)} s`);
};

const started = Date.now();
await Promise.all(
  servers.map((s) =>
    runServer(s).catch((e: unknown) => {
      serverFailures.set(s.kind.name, e instanceof Error ? (e.stack ?? e.message) : String(e));
    }),
  ),
);
const elapsed = Date.now() - started;

// ---------------------------------------------------------------------------------------------
// Reporting

const describe = (m: Mismatch): string => {
  const { upload } = m;
  const c = upload.case;
  const only = `STATEHOLD_DIFF_SEED=${SEED} STATEHOLD_DIFF_RUNS=${RUNS} STATEHOLD_DIFF_EVENTS=${EVENTS} STATEHOLD_DIFF_ONLY=${c.index} STATEHOLD_DIFF_FLAVORS=${upload.flavor.name} STATEHOLD_DIFF_SERVERS=${m.server}`;
  return [
    `${m.what}: seed ${SEED}, case ${c.index}, ${upload.flavor.name}, server ${m.server}, instance i${m.instance}, ${where(m)}${m.event ? ` ${JSON.stringify(m.event)}` : ''}${m.afterRestart ? ' (after the restart)' : ''}`,
    `  expected: ${JSON.stringify(m.expected)}`,
    `  got:      ${JSON.stringify(m.got)}`,
    ...upload.spec.instances.map((events, i) => `  events of i${i}: ${JSON.stringify(events)}`),
    `  create context: ${JSON.stringify(upload.spec.createContext ?? null)}`,
    `  run alone: ${only} make test-build && npx tap dist-test/test/differential-xstate.test.js`,
    `  machine (${upload.flavor.bundled ? 'bundled with esbuild as smply does, from this source' : 'uploaded as is'}):`,
    ...upload.source.split('\n').map((l) => `    ${l}`),
  ].join('\n');
};

t.comment(`log lines found as xstate wrote them: ${logLinesChecked}`);
t.comment(`events sent after done were answered: ${JSON.stringify(Object.fromEntries([...afterDoneAnswers].sort()))}`);
t.comment(
  `differential: seed ${SEED}, ${cases.length} machines x ${FLAVORS.length} uploads x ${servers.length} servers in ${(elapsed / 1000).toFixed(1)} s`,
);

for (const [server, failure] of serverFailures) {
  t.test(`the ${server} node's run`, async (t) => {
    console.error(`\nthe ${server} node's run stopped: ${failure}\n`);
    t.fail(`the ${server} node's run stopped before its end (printed above)`);
  });
}

for (const upload of uploads) {
  t.test(`case ${upload.case.index} ${upload.flavor.name}`, async (t) => {
    for (const server of servers) {
      const found = mismatches.filter((m) => m.upload === upload && m.server === server.kind.name);
      if (found.length === 0 && !completed.has(`${server.kind.name} ${upload.machine}`))
        t.fail(`${server.kind.name}: not driven to its end (the node's run stopped)`);
      else if (found.length === 0) t.pass(`${server.kind.name}: every answer, admin state, history and log as xstate's`);
      for (const m of found) {
        const text = describe(m);
        console.error(`\n${text}\n`);
        t.fail(`${server.kind.name}: ${m.what} (instance i${m.instance}, ${where(m)}); the machine, events and seed are printed above`, {
          diagnostic: true,
          seed: SEED,
          case: upload.case.index,
          flavor: upload.flavor.name,
          server: m.server,
          expected: m.expected,
          got: m.got,
        });
      }
    }
  });
}

t.test('the generated machines cover what the test is meant to cover', async (t) => {
  if (ONLY || RUNS < 6) return t.pass('a subset was asked for');
  const seen = new Set<string>();
  for (const u of uploads) for (const [k, v] of Object.entries(u.spec.features)) if (v) seen.add(k);
  const all = Object.keys(uploads[0]?.spec.features ?? {}) as (keyof Features)[];
  t.same(
    all.filter((k) => !seen.has(k)),
    [],
    'no feature missing',
  );
  const kinds = new Set(
    cases.flatMap((c) => [...c.references.values()].flatMap((runs) => runs.flatMap((r) => r.steps.map((s) => s.kind)))),
  );
  t.same([...kinds].sort(), ['after-done', 'ok', 'refused'], 'events taken, refused for throwing, and sent after done');
});
