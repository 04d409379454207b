import { InstanceNotFoundError, ServiceError } from '../domain/errors.js';
import { allSettledWithin } from '../domain/within-ms.js';
import { RequestMovedError } from '../store/instance-store.js';
import type { OwnedReads } from './forwarder.js';
import { type AnswerOf, type InstanceCommand, keyOf, type OwnerSide, requestIdOf, stateOf } from './instance-commands.js';

export interface OwnerRunsOptions {
  /** Whether this node owns the instance in its view now. */
  owns(orgId: string, machine: string, name: string): boolean;
  /** What this node answers of what it holds (an instance's head and history). */
  reads: Pick<OwnedReads, 'head' | 'history'>;
  /** Run before each command (Forwarder's options say what it does). */
  prepare?: (
    orgId: string,
    machine: string,
    name: string,
    request: { retried: boolean; requestId?: string },
  ) => Promise<{ retried: boolean }>;
  /** Whether an instance a command did not find is there once this node's copy caught up with the log. */
  foundAfterCatchUp?: (orgId: string, machine: string, name: string) => Promise<boolean>;
  onError: (message: string, error: unknown) => void;
}

/**
 * The instance commands this node runs as their owner, forwarded to it or its own (Forwarder): each run
 * on the owner side (OwnerSide) after `prepare`, tracked until it answers, so that a hand-over can wait
 * for the ones on instances this node gave away (settleNotOwned); one that outlived its hand-over, or
 * found no instance on a copy behind the log, is asked of the new owner or run again.
 */
export class OwnerRuns {
  /** The commands running, until each answers. */
  private readonly running = new Set<{ key: [string, string, string]; run: Promise<unknown> }>();

  constructor(
    private readonly local: OwnerSide,
    private readonly options: OwnerRunsOptions,
  ) {}

  /**
   * Resolves once the commands this node is running as the owner of instances it no longer owns have
   * answered (a hand-over: Membership.handOverWith), or after `maxMs`; true when they all had. A command
   * counts from its ownership check on, so one still in `prepare` is waited for too.
   */
  settleNotOwned(maxMs: number): Promise<boolean> {
    const given = [...this.running].filter(({ key: [orgId, machine, name] }) => !this.options.owns(orgId, machine, name));
    return allSettledWithin(
      given.map(({ run }) => run),
      maxMs,
    );
  }

  /** Runs an instance command on this node, its owner (tracked in `running` until it answers). */
  run<C extends InstanceCommand>(command: C): Promise<AnswerOf<C>>;
  run(command: InstanceCommand): Promise<AnswerOf<InstanceCommand>> {
    const key = keyOf(command);
    const run = this.runAsOwner(command).then(
      (answer) => this.answeredHere(command, answer),
      (error: unknown) => this.failedHere(command, error),
    );
    const entry = { key, run };
    this.running.add(entry);
    const forget = () => void this.running.delete(entry);
    entry.run.then(forget, forget);
    return entry.run;
  }

  /*
   * A command that outlived a hand-over (Membership.handOverWith waits for it only so long) runs on a
   * copy this node has let go: the instance's head is gone from it, or not the latest, and the command
   * found no instance (404, or a delete's false, a head or history read's nothing) or its head moved
   * (409). Nothing was written (the log's fence); the owner now answers instead of this stale copy.
   */
  private handedOver(command: InstanceCommand): RequestMovedError | undefined {
    const [orgId, machine, name] = keyOf(command);
    return this.options.owns(orgId, machine, name)
      ? undefined
      : new RequestMovedError(`instance ${name} of machine ${machine} was handed over while its request ran here`);
  }

  private answeredHere(command: InstanceCommand, answer: AnswerOf<InstanceCommand>): AnswerOf<InstanceCommand> {
    const nothing = answer === false || answer === null || (Array.isArray(answer) && answer.length === 0);
    const moved =
      nothing && (command.op === 'delete' || command.op === 'head' || command.op === 'history') ? this.handedOver(command) : undefined;
    if (moved) throw moved;
    return answer;
  }

  /** A command that failed here: asked of the new owner after a hand-over; run again once if the instance was only missing from a copy behind the log. */
  private async failedHere(command: InstanceCommand, error: unknown): Promise<AnswerOf<InstanceCommand>> {
    const moved = error instanceof ServiceError && (error.status === 404 || error.status === 409) ? this.handedOver(command) : undefined;
    if (moved) throw moved;
    const [orgId, machine, name] = keyOf(command);
    if (error instanceof InstanceNotFoundError && (await this.options.foundAfterCatchUp?.(orgId, machine, name))) {
      this.options.onError(
        `instance ${name} of machine ${machine} was not in this node's copy when a request came, though the log had it; the request runs again`,
        error,
      );
      return this.runAsOwner(command);
    }
    throw error;
  }

  /** Runs an instance command on this node, its owner: the answer is what the command's reply carries. */
  private async runAsOwner<C extends InstanceCommand>(command: C): Promise<AnswerOf<C>>;
  private async runAsOwner(command: InstanceCommand): Promise<AnswerOf<InstanceCommand>> {
    const { local } = this;
    const { prepare } = this.options;
    let retried = command.retry === true;
    if (prepare) {
      const [orgId, machine, name] = keyOf(command);
      const requestId = requestIdOf(command);
      ({ retried } = await prepare(orgId, machine, name, { retried, ...(requestId === undefined ? {} : { requestId }) }));
    }
    switch (command.op) {
      case 'create': {
        const { orgId, machine, name, versionId, context, authContext, requestId } = command;
        return stateOf(await local.create({ orgId, machine, name, versionId, context, authContext, requestId }));
      }
      case 'read':
        return stateOf(await local.read(command.orgId, command.machine, command.name, command.authContext));
      case 'send': {
        const { orgId, machine, name, event, authContext, requestId } = command;
        return stateOf(await local.send(orgId, machine, name, event, authContext, requestId, retried));
      }
      case 'setStatus':
        await local.setStatus(command.orgId, command.machine, command.name, command.status);
        return null;
      case 'setTargetVersion':
        await local.setTargetVersion(command.orgId, command.machine, command.name, command.targetVersionId);
        return null;
      case 'delete':
        return local.delete(command.orgId, command.machine, command.name);
      case 'fireTimers':
        return local.fireTimers(command.orgId, command.machine, command.name);
      case 'receive':
        await local.receive(command.message);
        return null;
      case 'head':
        return this.options.reads.head(command.orgId, command.machine, command.name) ?? null;
      case 'history':
        return this.options.reads.history(command.orgId, command.machine, command.name, command.afterSeq, command.limit);
    }
  }
}
