import { unavailable } from '../../domain/errors.js';
import type { InstanceHead } from '../instance-store.js';
import type { CopyMending } from './copy-mending.js';
import { keyOf } from './log-entries.js';
import type { JetStreamTransitionLog } from './transition-log.js';

type InstanceKey = Pick<InstanceHead, 'orgId' | 'machine' | 'name'>;

/** An audit runs this long after the last thing that asked for one (followers failing go on for a while). */
const AUDIT_AFTER_MS = 5_000;
/** And once more this long after it succeeded: a replica can diverge while its server's groups elect again. */
const AUDIT_AGAIN_MS = 30_000;
/** A failed audit (the log's leader out of reach) is tried again this long after. */
const AUDIT_RETRY_MS = 5_000;
/** A failed audit is tried at most this many times in a row, until something asks for one again. */
const AUDIT_TRIES = 24;
/** At most this many instances whose appends failed are kept for the next audit (the audit of lists still sees the rest). */
const SUSPECTS_KEPT = 10_000;
/** The copy's instances are listed this many at a time. */
const LISTED_AT_ONCE = 5_000;
/** At most this many deleted instances are remembered (then forgotten, and asked about again once). */
const DELETED_KEPT = 100_000;

export interface InstanceAuditDeps {
  log: JetStreamTransitionLog;
  mending: CopyMending;
  /** The partitions this node holds that are caught up (the others are still being filled from the log). */
  readyPartitions(): number[];
  /** The instances the local copy holds (of every partition). */
  localInstances(): Iterable<[string, string, string]>;
  partitionOf(orgId: string, machine: string, name: string): number;
  /** Rebuilds one instance held here from the log's leader (throws when the log cannot be asked). */
  rebuilt(key: InstanceKey): Promise<unknown>;
  note(message: string): void;
  onError(message: string, error: unknown): void;
}

/**
 * Compares the instances of the partitions this node holds with those the log's leader has, after
 * something that can leave a replica diverged (a partition's follower failing, NATS reconnecting), and
 * mends each instance that differs. The read barrier mends an instance when it is read or written
 * (copy-mending.ts), and an entry that names one the replica lacked brings it in; but a 2.9.10 replica
 * that diverged can lack an instance's create with no later entry (an instance made, through another
 * node, while this node's server was cut off) or hold a create the log never committed, and lists and
 * index queries, answered from the copy, missed the one or showed the other until it was read
 * (a partition probe: an instance created with a 200 during a cut was in no node's list).
 */
export class InstanceAudit {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /**
   * Instances whose last entry on the log was their delete, with the number of their entries then: the
   * copy rightly lacks them, and they are asked again only when they have more (made again).
   */
  private readonly deleted = new Map<string, number>();

  /**
   * Instances whose append failed without the log saying no (a timeout, no leader): a replica that
   * diverged meanwhile can keep such an append, and the copy that follows it show the entry with no
   * later one to reveal it (a phantom); each is mended at the next audit.
   */
  private readonly suspects = new Map<string, InstanceKey>();

  constructor(private readonly deps: InstanceAuditDeps) {}

  /** An append of the instance failed without a refusal: it is mended at an audit, AUDIT_AFTER_MS after the last such. */
  suspect(key: InstanceKey): void {
    if (this.suspects.size >= SUSPECTS_KEPT) return;
    this.suspects.set(keyOf(key), { orgId: key.orgId, machine: key.machine, name: key.name });
    this.wanted();
  }

  /**
   * Mends now the instances of the given partitions whose appends failed without a refusal, before a
   * list or an index query answers from the copy: a create the log never committed would show there
   * until the next audit, and vanish after it (a partition probe listed one through every node, then
   * read it 404). Throws when the log cannot be asked (the caller answers 503 rather than the copy).
   */
  async mendSuspectsIn(partitions: ReadonlySet<number>): Promise<void> {
    for (const [instance, key] of [...this.suspects]) {
      if (!partitions.has(this.deps.partitionOf(key.orgId, key.machine, key.name))) continue;
      await this.deps.rebuilt(key);
      this.suspects.delete(instance);
    }
  }

  /**
   * Before an instance is written: rebuilds it from the log's leader when an append of it failed without
   * a refusal since it was last mended. Its copy may hold, at its position, an entry the log never
   * committed where the log holds another of the instance at the same sequence (a fence, a commit by the
   * node that served it meanwhile): positions cannot tell them apart, and a partition probe saw a fence
   * so hidden from the old owner, which then committed the fenced request a second time. True when it
   * was rebuilt (the writer runs its request again on the rebuilt head).
   */
  async rebuiltIfSuspect(key: InstanceKey): Promise<boolean> {
    const instance = keyOf(key);
    if (!this.suspects.has(instance)) return false;
    try {
      await this.deps.rebuilt(key);
    } catch (error) {
      throw unavailable(
        `instance ${key.name} of machine ${key.machine} cannot be checked against the cluster's log now (${error instanceof Error ? error.message : String(error)}); retry`,
      );
    }
    this.suspects.delete(instance);
    return true;
  }

  /** Something that can leave the copy diverged happened: an audit AUDIT_AFTER_MS after the last such call. */
  wanted(): void {
    if (this.stopped) return;
    this.schedule(AUDIT_AFTER_MS, 0, true);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** After stop, when the node follows the log again. */
  resume(): void {
    this.stopped = false;
  }

  private schedule(ms: number, tries: number, again: boolean): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // (one at a time: one asked for while another runs starts after it)
      this.running = (this.running ?? Promise.resolve()).then(() => this.run(tries, again));
    }, ms);
    this.timer.unref();
  }

  private async run(tries: number, again: boolean): Promise<void> {
    if (this.stopped) return;
    try {
      await this.audit();
      if (again && !this.timer) this.schedule(AUDIT_AGAIN_MS, 0, false);
    } catch (error) {
      if (tries + 1 < AUDIT_TRIES && !this.timer) this.schedule(AUDIT_RETRY_MS, tries + 1, again);
      else if (tries + 1 >= AUDIT_TRIES) this.deps.onError('could not compare the instances this node holds with the log', error);
    }
  }

  /**
   * One audit of every partition held and caught up here; how many instances it mended. The copy's
   * instances are listed before the log's: an instance the copy holds was in the log before the copy
   * applied it, so one the log's list then lacks is one the log never committed.
   */
  async audit(): Promise<number> {
    const { deps } = this;
    const partitions = new Set(deps.readyPartitions());
    if (partitions.size === 0) return 0;
    const held = new Map<string, InstanceKey>();
    let listed = 0;
    for (const [orgId, machine, name] of deps.localInstances()) {
      if (partitions.has(deps.partitionOf(orgId, machine, name))) held.set(keyOf({ orgId, machine, name }), { orgId, machine, name });
      // (a copy of many instances is listed in parts, with the node's requests served between them)
      if (++listed % LISTED_AT_ONCE === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    const lacking: Array<InstanceKey & { entries: number }> = [];
    for (const partition of partitions)
      for (const key of await deps.log.instancesOf(partition)) {
        const instance = keyOf(key);
        if (!held.delete(instance) && this.deleted.get(instance) !== key.entries) lacking.push(key);
      }
    let mended = 0;
    for (const key of lacking) {
      const last = await deps.log.lastEntry(key.orgId, key.machine, key.name);
      if (!last) continue;
      if (last.json<{ kind?: string }>().kind === 'delete') {
        if (this.deleted.size >= DELETED_KEPT) this.deleted.clear();
        this.deleted.set(keyOf(key), key.entries);
        continue;
      }
      if (await deps.mending.filledIfAbsent(key, last.seq)) mended++;
    }
    // (what is left of the copy's list is not in the log's)
    for (const key of held.values()) if (await deps.mending.droppedIfNotOnLog(key)) mended++;
    // (suspects of partitions not held here are let go: their owners mend them)
    for (const [instance, key] of this.suspects)
      if (!partitions.has(deps.partitionOf(key.orgId, key.machine, key.name))) this.suspects.delete(instance);
    await this.mendSuspectsIn(partitions);
    return mended;
  }
}
