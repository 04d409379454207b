/**
 * Durable timers coming due (design.md §4): the instance's delayed events that are due are delivered
 * through its mailbox like any event. A failed delivery (a paused instance, machine code that fails)
 * is retried a retry delay later, then dropped with a log line (timer-retries.ts).
 */
import type { PendingTimer } from '../domain/machine-state.js';
import { childStoppedEvent } from '../sandbox/index.js';
import type { InstanceHead } from '../store/instance-store.js';
import { dropHeadOnConflict, type ActorHeads } from './actor-heads.js';
import type { InstanceActor } from './instance-actor.js';
import type { LazyUpgrade } from './lazy-upgrade.js';
import type { RuntimeParts } from './runtime-parts.js';
import { dueEvent, earliestDue } from './settle-step.js';
import { timerRetryPlan } from './timer-retries.js';
import type { Input, Inputs, TransitionPipeline } from './transition-pipeline.js';

/** What a timer wake-up found. */
export type TimerFiring = 'fired' | 'retry-later' | 'dropped' | 'nothing-due';

export class TimerDelivery {
  constructor(
    private readonly parts: RuntimeParts,
    private readonly heads: ActorHeads,
    private readonly pipeline: TransitionPipeline,
    private readonly upgrade: LazyUpgrade,
  ) {}

  /** Delivers the instance's delayed events that are due; see the file's comment. */
  fire(orgId: string, machine: string, name: string): Promise<TimerFiring> {
    const actor = this.parts.actors.obtain(orgId, machine, name);
    return actor.enqueue(() => this.fireDue(actor));
  }

  /**
   * Inside the actor's mailbox: delivers its delayed events that are due now (fire). An event or a
   * message that comes in after a delayed event's due time runs after it (EventDelivery), as it would
   * on a live interpreter, however late the timer scheduler is.
   */
  async fireDue(actor: InstanceActor): Promise<TimerFiring> {
    const { actors, clock, deps, retries } = this.parts;
    const { orgId, machine, name } = actor;
    this.heads.dropStale(actor);
    actor.head ??= deps.instances.getInstance(orgId, machine, name);
    const head = actor.head;
    if (!head) {
      actors.release(actor);
      return 'nothing-due';
    }
    const now = clock.now();
    const due = head.pendingTimers.filter((timer) => dueEvent(timer, now)).sort((a, b) => a.dueAt - b.dueAt);
    if (due.length === 0) return 'nothing-due';
    if (head.status === 'paused') return this.deliveryFailed(actor, head, due, 'the instance is paused');
    // An upgrade that commits before the delivery fails moves the head on: the failure is recorded
    // against that head (the one before it would fail its fenced replace, and the attempt go uncounted).
    let current = head;
    try {
      current = await this.upgrade.ifDue(actor, head);
      await retries.untilNotMoved(() => this.pipeline.run(actor, current, dueInputs(current, now), {}));
      return 'fired';
    } catch (error) {
      return this.deliveryFailed(actor, current, due, error instanceof Error ? error.message : String(error));
    }
  }

  /** Moves the failed timers a retry delay ahead, or drops those out of retries (timer-retries.ts); the live actor is rebuilt from the result. */
  private async deliveryFailed(actor: InstanceActor, head: InstanceHead, due: PendingTimer[], reason: string): Promise<TimerFiring> {
    const { clock, deps } = this.parts;
    const { timerRetryDelayMs, timerMaxRetries } = deps.settings;
    const { next, dropped, lines } = timerRetryPlan(
      head,
      due,
      reason,
      { retryDelayMs: timerRetryDelayMs, maxRetries: timerMaxRetries },
      clock.now(),
    );
    for (const line of lines)
      deps.logs.service(actor.orgId, actor.machine, actor.name, line.level, line.message, line.attrs, head.versionId);
    const { pendingTimers } = next;
    try {
      await deps.instances.replaceHead(next, head);
    } catch (error) {
      dropHeadOnConflict(actor, error);
      throw error;
    }
    actor.head = next;
    // The live interpreter still has the old due times: rebuild it from the head on next use.
    actor.discardLive();
    if (pendingTimers.length > 0) deps.onTimersPending?.(Math.min(...pendingTimers.map((timer) => timer.dueAt)));
    return dropped ? 'dropped' : 'retry-later';
  }
}

/**
 * The inputs that deliver a head's delayed events due by `now`, as a live interpreter would have: first
 * the error events owed for children stopped at an earlier settle timeout (wire-protocol §8.1: before
 * the next event), then one due time after another, earliest first, each read from the result before
 * it, so that a delayed event an earlier one cancelled is not delivered (nor recorded) and one it
 * scheduled that is due by `now` too comes in its turn (a chain of delays a late scheduler or a restart
 * left behind). Timers due at the same moment fire in the first advance to it; each gets its record.
 */
const dueInputs = (head: InstanceHead, now: number): Inputs => {
  const queue: Input[] = head.stoppedChildren.map((childId) => {
    const errorEvent = childStoppedEvent(head.snapshot, childId);
    return { event: errorEvent, run: (sandbox, key, restore) => sandbox.send(key, errorEvent, now, restore) };
  });
  // (a timer still pending after the advance to its time did not fire: it is not asked for again)
  const asked = new Set<string>();
  return (latest) => {
    if (queue.length === 0) {
      const next = earliestDue((latest ?? head).pendingTimers, now, (timer) => asked.has(`${timer.id}@${timer.dueAt}`));
      if (next === undefined) return undefined;
      for (const timer of next.due) {
        asked.add(`${timer.id}@${timer.dueAt}`);
        queue.push({ event: timer.event, run: (sandbox, key, restore) => sandbox.advance(key, next.at, restore) });
      }
    }
    return queue.shift();
  };
};
