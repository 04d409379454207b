/**
 * Creating an instance (wire-protocol §3.4): allowWrite for its initialization and its start in one
 * call into the sandbox, the start settled, its first record committed. A create retried under the
 * same request id answers the instance its first attempt made.
 */
import { conflict, notFound, rejectedByAuthorizer } from '../domain/errors.js';
import { changedIndexes } from '../domain/index-values.js';
import type { CreateRequest } from '../domain/instance-requests.js';
import type { MachineEvent } from '../domain/machine-state.js';
import type { CommitEffects, InstanceHead, TransitionRecord } from '../store/instance-store.js';
import type { ActorHeads } from './actor-heads.js';
import { billedTransitions, checkedSize, headStateOf, stampTimes } from './commit-records.js';
import type { InstanceActor } from './instance-actor.js';
import { asRequestError } from './request-retries.js';
import type { RuntimeParts } from './runtime-parts.js';
import { firedRecords } from './settle-step.js';
import { StepEffects } from './step-effects.js';
import type { TransitionPipeline } from './transition-pipeline.js';

/** A create as the runtime runs it: a request's, or one machine code asked for (message-receipt.ts). */
export interface Creation extends CreateRequest {
  parent?: { machine: string; name: string };
  receivedMessageId?: string;
  /** How many instances in a row, each made by the one before, led to this one (see MAX_MADE_DEPTH). */
  madeDepth?: number;
}

const INIT_EVENT: MachineEvent = { type: 'xstate.init' };

export class InstanceCreation {
  constructor(
    private readonly parts: RuntimeParts,
    private readonly heads: ActorHeads,
    private readonly pipeline: TransitionPipeline,
  ) {}

  async create(request: CreateRequest): Promise<InstanceHead> {
    const { actors, retries } = this.parts;
    const { orgId, machine, name } = request;
    const existing = this.heads.head(orgId, machine, name);
    if (existing && request.requestId !== undefined && this.createdBy(existing, request.requestId)) return existing;
    if (existing) throw conflict(`instance ${name} of machine ${machine} already exists`);
    const actor = actors.obtain(orgId, machine, name);
    return actor.enqueue(async () => {
      try {
        return await retries.afterCrashOnceMore(
          () => this.createWithin(actor, request),
          () => request.versionId,
        );
      } finally {
        if (!actor.head) actors.release(actor);
      }
    });
  }

  /** Runs inside the mailbox; its machine cannot be deleted meanwhile (MachineGate). */
  async createWithin(actor: InstanceActor, request: Creation): Promise<InstanceHead> {
    const leave = await this.parts.gate.enterCreate(request.orgId, request.machine);
    try {
      if (!this.parts.deps.machines.getMachine(request.orgId, request.machine)) throw notFound(`machine ${request.machine} does not exist`);
      return await this.createFirstRecord(actor, request);
    } finally {
      leave();
    }
  }

  /** Whether the instance's first record was written by the create with that id (a retried create). */
  private createdBy(head: InstanceHead, requestId: string): boolean {
    return this.parts.deps.instances.listTransitions(head.orgId, head.machine, head.name, 0, 1)[0]?.requestId === requestId;
  }

  /** allowWrite initialization, start, settle, commit the first record. */
  private async createFirstRecord(actor: InstanceActor, request: Creation): Promise<InstanceHead> {
    const { deps, clock, indexer, usage } = this.parts;
    const { orgId, machine, name, versionId } = request;
    // Checked inside the mailbox too: a create queued behind another create of the same name.
    this.heads.dropStale(actor);
    const existing = actor.head ?? deps.instances.getInstance(orgId, machine, name);
    if (existing && request.requestId !== undefined && this.createdBy(existing, request.requestId)) return existing;
    if (existing) throw conflict(`instance ${name} of machine ${machine} already exists`);
    const sandbox = await deps.sandboxes.get(orgId, machine, versionId);
    const now = clock.now();
    const effects = new StepEffects();
    try {
      actor.sandbox = sandbox;
      const seqBeforeFirst = sandbox.activitySeq;
      // allowWrite (initialization) and the start in one round trip, as events do
      const authorization = {
        type: 'initialization' as const,
        machineInstanceName: name,
        context: request.context,
        authContext: request.authContext,
      };
      const started = await sandbox.startAuthorized(
        actor.key,
        { context: request.context },
        { machineInstanceName: name, nowMs: now },
        authorization,
      );
      if (started === 'rejected') throw rejectedByAuthorizer('allowWrite');
      const first = effects.absorb(started);
      const settled = await this.pipeline.settle(actor, sandbox, first, now, effects, seqBeforeFirst);
      const { result, stoppedChildren } = settled;
      const size = checkedSize(result, deps.settings);
      const untilFired = settled.beforeFired ?? result;
      const records: TransitionRecord[] = [
        {
          seq: 1,
          createdAt: '',
          ts: now,
          event: INIT_EVENT,
          state: untilFired.state,
          ...(request.requestId === undefined ? {} : { requestId: request.requestId }),
        },
        ...firedRecords(settled, 1),
      ];
      const last = records.at(-1) as TransitionRecord;
      last.state = result.state;
      stampTimes(records, now - 1);
      const head: InstanceHead = indexer.index({
        orgId,
        machine,
        name,
        versionId,
        createdAt: new Date(now).toISOString(),
        status: 'running',
        seq: last.seq,
        ts: last.ts,
        ...headStateOf(result),
        stoppedChildren,
        timerAttempts: {},
        ...(request.parent ? { parent: request.parent } : {}),
        ...(request.madeDepth ? { madeDepth: request.madeDepth } : {}),
      });
      const outbox = this.pipeline.outboxOf(head, effects, now);
      const commitEffects: CommitEffects = {
        outbox,
        ...(request.receivedMessageId ? { receivedMessageId: request.receivedMessageId } : {}),
      };
      const startedAt = performance.now();
      const billed = billedTransitions(records.length, size.contextBytes, changedIndexes(undefined, head.indexValues));
      const created = await usage.countedIfMadeLate(deps.instances.createInstance(head, records, commitEffects), orgId, machine, billed);
      if (created) deps.meters?.committed(records.length, (performance.now() - startedAt) / 1000);
      if (!created) {
        // A retried create whose first attempt did land (its answer was lost) answers that instance.
        const stored = deps.instances.getInstance(orgId, machine, name);
        if (stored && request.requestId !== undefined && this.createdBy(stored, request.requestId)) {
          actor.discardLive();
          actor.head = stored;
          return stored;
        }
        throw conflict(`instance ${name} of machine ${machine} already exists`);
      }
      usage.transitions(orgId, machine, billed);
      this.pipeline.committed(actor, head, size.stateBytes, outbox);
      return head;
    } catch (error) {
      actor.discardLive();
      throw asRequestError(error, `${orgId}/${machine}/${name}`, deps.logger);
    }
  }
}
