/**
 * The shared pipeline of every write after creation (transition) and the bookkeeping after any
 * durable commit (committed): the inputs run on the live actor, the step settled, the context checked,
 * records, outbox and effects committed in one fenced transaction.
 */
import { ServiceError } from '../domain/errors.js';
import { changedIndexes } from '../domain/index-values.js';
import { forgetJsonText } from '../domain/json-texts.js';
import type { MachineEvent } from '../domain/machine-state.js';
import type { Restore, StepResult } from '../sandbox/index.js';
import type { CommitEffects, InstanceHead, OutboxMessage, TransitionRecord } from '../store/instance-store.js';
import { dropHeadOnConflict } from './actor-heads.js';
import { billedTransitions, checkedSize, headStateOf, keptTimerAttempts, stampTimes } from './commit-records.js';
import type { InstanceActor } from './instance-actor.js';
import { outboxMessages } from './outbox-messages.js';
import { asRequestError } from './request-retries.js';
import type { RuntimeParts } from './runtime-parts.js';
import type { VersionSandbox } from './runtime-sandboxes.js';
import { isSettled } from './settle.js';
import { firedRecords, type Settled, settleStep } from './settle-step.js';
import { StepEffects } from './step-effects.js';
import { updateOf } from './update-bus.js';

/**
 * One input of a request and what its history record says it was. `restore` is given to the first
 * input of a step whose actor is not live in the sandbox (see run).
 */
export type Input = {
  event: MachineEvent;
  requestId?: string;
  run: (sandbox: VersionSandbox, key: string, restore: Restore | undefined) => Promise<StepResult>;
};

/**
 * The inputs of a step: a list, or the next input given the result of the one before (undefined
 * before the first), until it gives none (at most MAX_INPUTS): delayed events fired one due time after
 * another, where each may cancel or schedule the next (timer-firing.ts).
 */
export type Inputs = Input[] | ((latest: StepResult | undefined) => Input | undefined);

/** Inputs one step runs at most (an actor holds at most 1,000 timers; a chain of overdue delays is bounded by it). */
const MAX_INPUTS = 1_000;

const nextOf = (inputs: Inputs): ((latest: StepResult | undefined) => Input | undefined) => {
  if (typeof inputs === 'function') return inputs;
  let at = 0;
  return () => inputs[at++];
};

export class TransitionPipeline {
  constructor(private readonly parts: RuntimeParts) {}

  /**
   * Runs the inputs on the live actor, settles after the last one, checks the context, commits
   * records, outbox and effects in one transaction. On any failure the live actor is dropped, so the
   * instance stays exactly as committed. `now`: the time the inputs give the machine (an event's),
   * from which the settle budget counts; a delayed event it schedules is due after it by its delay, so
   * a budget measured from a later reading of the clock could take in one due after the budget.
   */
  async run(
    actor: InstanceActor,
    head: InstanceHead,
    inputs: Inputs,
    commitEffects: CommitEffects,
    now: number = this.parts.clock.now(),
  ): Promise<InstanceHead> {
    const { clock, deps } = this.parts;
    const effects = new StepEffects();
    try {
      // The usual case (version loaded, actor live) costs no extra turns of the microtask queue.
      const sandbox = deps.sandboxes.loaded(head.versionId) ?? (await deps.sandboxes.get(actor.orgId, actor.machine, head.versionId));
      // Not live there (evicted, or a new worker): the first call restores it from the head it already
      // holds, in the same round trip, so a reload costs no more sandbox work than an ordinary event.
      let restore = actor.sandbox !== sandbox || !sandbox.healthy ? restoreOf(actor, head) : undefined;
      actor.sandbox = sandbox;
      const records: TransitionRecord[] = [];
      let result: StepResult | undefined;
      const seqBeforeFirst = sandbox.activitySeq;
      const nextInput = nextOf(inputs);
      for (let input = nextInput(undefined), n = 0; input !== undefined && n < MAX_INPUTS; input = nextInput(result), n++) {
        const appliedAt = clock.now();
        result = effects.absorb(await input.run(sandbox, actor.key, restore));
        restore = undefined;
        records.push({
          seq: head.seq + records.length + 1,
          createdAt: '',
          ts: appliedAt,
          event: input.event,
          state: result.state,
          ...(input.requestId === undefined ? {} : { requestId: input.requestId }),
        });
      }
      if (!result) return head;
      const settled: Settled = isSettled(result, now + deps.settings.settleBudgetMs)
        ? { result, stoppedChildren: [], fired: [] }
        : await this.settle(actor, sandbox, result, now, effects, seqBeforeFirst);
      const lastInput = records.at(-1) as TransitionRecord;
      const untilFired = settled.beforeFired ?? settled.result;
      lastInput.state = untilFired.state;
      records.push(...firedRecords(settled, lastInput.seq));
      const last = records.at(-1) as TransitionRecord;
      last.state = settled.result.state;
      const size = checkedSize(settled.result, deps.settings);
      const next = await this.commit(actor, head, records, settled.result, settled.stoppedChildren, size, effects, commitEffects);
      if (settled.timerFailed) actor.discardLive();
      return next;
    } catch (error) {
      // A write the authorizer refused never reached the machine: its live interpreter is intact.
      if (!(error instanceof ServiceError && error.code === 'rejected-by-machine-authorizer')) actor.discardLive();
      dropHeadOnConflict(actor, error);
      throw asRequestError(error, `${actor.orgId}/${actor.machine}/${actor.name}`, deps.logger);
    }
  }

  /** The step settled (settle-step.ts), on the runtime's clock and budget. */
  settle(
    actor: InstanceActor,
    sandbox: VersionSandbox,
    first: StepResult,
    startedAt: number,
    effects: StepEffects,
    seqBeforeFirst: number,
  ): Promise<Settled> {
    const { clock, deps } = this.parts;
    return settleStep({ clock, logs: deps.logs, settings: deps.settings }, actor, sandbox, first, startedAt, effects, seqBeforeFirst);
  }

  /** After a durable commit: remember the head, account memory, wake the timer scheduler and the outbox. */
  committed(actor: InstanceActor, head: InstanceHead, stateBytes: number, outbox: OutboxMessage[]): void {
    const { actors, deps } = this.parts;
    forgetJsonText(head.context);
    actor.head = head;
    deps.updates?.publish(updateOf(head));
    actors.resize(actor, stateBytes + 4096);
    if (head.pendingTimers.length > 0) deps.onTimersPending?.(Math.min(...head.pendingTimers.map((timer) => timer.dueAt)));
    if (outbox.length > 0) {
      deps.fault?.('after-sender-commit');
      deps.onOutbox?.();
    }
  }

  /** The messages a commit of `sender` puts in the outbox (outbox-messages.ts); a sendParent with no parent is logged. */
  outboxOf(sender: InstanceHead, effects: StepEffects, now: number): OutboxMessage[] {
    return outboxMessages(sender, effects, now, (type) =>
      this.parts.deps.logs.service(
        sender.orgId,
        sender.machine,
        sender.name,
        'warn',
        `sendParent(${type}) has no persistent parent to go to; dropped`,
        { event: type },
        sender.versionId,
      ),
    );
  }

  private async commit(
    actor: InstanceActor,
    head: InstanceHead,
    records: TransitionRecord[],
    result: StepResult,
    stoppedChildren: string[],
    size: { contextBytes: number; stateBytes: number },
    effects: StepEffects,
    commitEffects: CommitEffects,
  ): Promise<InstanceHead> {
    const { deps, indexer, usage } = this.parts;
    stampTimes(records, head.ts);
    const last = records.at(-1) as TransitionRecord;
    const state = headStateOf(result);
    const timerAttempts = keptTimerAttempts(head.timerAttempts, state.pendingTimers);
    const next = indexer.index({ ...head, seq: last.seq, ts: last.ts, ...state, stoppedChildren, timerAttempts });
    const outbox = this.outboxOf(next, effects, last.ts);
    const startedAt = performance.now();
    const billed = billedTransitions(records.length, size.contextBytes, changedIndexes(head.indexValues, next.indexValues));
    await usage.countedIfMadeLate(
      deps.instances.commit(next, head, records, { ...commitEffects, outbox }),
      actor.orgId,
      actor.machine,
      billed,
    );
    deps.meters?.committed(records.length, (performance.now() - startedAt) / 1000);
    usage.transitions(actor.orgId, actor.machine, billed);
    this.committed(actor, next, size.stateBytes, outbox);
    return next;
  }
}

/** What restores the actor's live state from its committed head (after eviction, a failure or a new worker). */
const restoreOf = (actor: InstanceActor, head: InstanceHead): Restore => ({
  name: actor.name,
  snapshot: head.snapshot,
  value: head.state,
  context: head.context,
  pendingTimers: head.pendingTimers,
});
