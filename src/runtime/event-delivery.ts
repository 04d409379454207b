/**
 * Events sent to an instance (wire-protocol §3.4): through its mailbox, allowWrite and the event in
 * one call into the sandbox, after a pending upgrade, the delayed events due by then and the error
 * events owed for children stopped at an earlier settle timeout; a retried request already applied is
 * answered, not applied again.
 */
import { conflict, rejectedByAuthorizer } from '../domain/errors.js';
import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import { childStoppedEvent } from '../sandbox/index.js';
import type { CommitEffects, InstanceHead } from '../store/instance-store.js';
import type { ActorHeads } from './actor-heads.js';
import type { InstanceActor } from './instance-actor.js';
import type { LazyUpgrade } from './lazy-upgrade.js';
import { guarded } from './request-retries.js';
import type { RuntimeParts } from './runtime-parts.js';
import { dueEvent } from './settle-step.js';
import type { Input, TransitionPipeline } from './transition-pipeline.js';

/** How far back in an instance's history a retried request is looked for (it is retried within seconds). */
const REQUEST_LOOKBACK = 100;

export class EventDelivery {
  constructor(
    private readonly parts: RuntimeParts,
    private readonly heads: ActorHeads,
    private readonly pipeline: TransitionPipeline,
    private readonly upgrade: LazyUpgrade,
    /** Inside the mailbox: the instance's delayed events due by now, delivered (TimerDelivery.fireDue). */
    private readonly dueTimers: (actor: InstanceActor) => Promise<unknown>,
  ) {}

  /** InstanceRuntime.send: the event through the mailbox; a retry already applied answers the committed state. */
  send(
    orgId: string,
    machine: string,
    name: string,
    event: MachineEvent,
    authContext: JsonObject,
    requestId: string | undefined,
    retry: boolean,
  ): Promise<InstanceHead> {
    const actor = this.parts.actors.obtain(orgId, machine, name);
    let runs = 0;
    return actor.enqueue(() =>
      this.parts.retries.afterCrashOnceMore(
        () => {
          const head = this.heads.load(actor);
          const mayBeApplied = retry || runs++ > 0;
          if (mayBeApplied && requestId !== undefined && this.applied(head, requestId)) return Promise.resolve(head);
          return this.deliver(actor, head, event, authContext, {}, requestId);
        },
        () => actor.head?.versionId,
      ),
    );
  }

  /** Runs inside the mailbox: allowWrite for an event, then the event with what is owed before it. */
  async deliver(
    actor: InstanceActor,
    head: InstanceHead,
    event: MachineEvent,
    authContext: JsonObject,
    effects: CommitEffects,
    requestId?: string,
  ): Promise<InstanceHead> {
    const { deps, clock } = this.parts;
    const { orgId, machine, name } = actor;
    if (head.status === 'paused') throw conflict(`instance ${name} is paused: events are rejected until it runs again`);
    // (first: one that fails fails the event, run once, and leaves the delayed events as they were)
    head = await this.upgrade.ifDue(actor, head);
    // A delayed event due before this one came goes first, however late the timer scheduler is: the
    // order is the one a live interpreter gives (one due after it waits, as there).
    if (head.pendingTimers.some((timer) => dueEvent(timer, clock.now()))) {
      await this.dueTimers(actor);
      head = actor.head ?? head;
    }
    const request = { type: 'event' as const, machineInstanceName: name, state: head.state, context: head.context, event, authContext };
    const now = clock.now();
    if (head.stoppedChildren.length === 0) {
      // The usual case: the authorizer and the event in one call into the sandbox.
      const caller = { machineInstanceName: name, authContext };
      const run: Input['run'] = async (sandbox, key, restore) => {
        const stepped = await sandbox.sendAuthorized(key, caller, event, now, restore);
        if (stepped === 'rejected') throw rejectedByAuthorizer('allowWrite');
        return stepped;
      };
      return this.pipeline.run(actor, head, [{ event, run, ...(requestId === undefined ? {} : { requestId }) }], effects, now);
    }
    const sandbox = await deps.sandboxes.get(orgId, machine, head.versionId);
    if (!(await guarded(sandbox.allowWrite(request), `${orgId}/${machine}/${name}`, deps.logger))) throw rejectedByAuthorizer('allowWrite');
    // Children stopped when an earlier event timed out get their error events first (wire-protocol §8.1).
    const inputs: Input[] = head.stoppedChildren.map((childId) => {
      const errorEvent = childStoppedEvent(head.snapshot, childId);
      return { event: errorEvent, run: (vi, key, restore) => vi.send(key, errorEvent, now, restore) };
    });
    inputs.push({ event, ...(requestId === undefined ? {} : { requestId }), run: (vi, key, restore) => vi.send(key, event, now, restore) });
    return this.pipeline.run(actor, head, inputs, effects, now);
  }

  /** Whether one of the instance's latest records applied the request with that id. */
  private applied(head: InstanceHead, requestId: string): boolean {
    const from = Math.max(0, head.seq - REQUEST_LOOKBACK);
    return this.parts.deps.instances
      .listTransitions(head.orgId, head.machine, head.name, from, REQUEST_LOOKBACK)
      .some((record) => record.requestId === requestId);
  }
}
