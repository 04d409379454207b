import type { InstanceHead } from '../instance-store.js';
import type { LocalCopy } from './held-partition-reads.js';
import { instanceOf as instanceOfEntry, keyOf, type LogEntry } from './log-entries.js';
import type { LogPositions } from './log-positions.js';
import { entriesBetween, entriesToRebuildFrom } from './log-repairs.js';
import type { PartitionCopy } from './partition-copy.js';
import type { JetStreamTransitionLog } from './transition-log.js';

type InstanceKey = Pick<InstanceHead, 'orgId' | 'machine' | 'name'>;

/** What mending a copy uses of its store (log-instance-store.ts). */
export interface CopyMendingDeps {
  log: JetStreamTransitionLog;
  local: LocalCopy;
  positions: LogPositions;
  /** The instance's partition's copy, when this node holds it. */
  copyOf(key: InstanceKey): PartitionCopy | undefined;
  /** Runs `work` in the instance's turn (after whatever applies to its rows already). */
  inTurn<T>(key: string, work: () => Promise<T>): Promise<T>;
  /** Applies an entry read from the log (not this node's own), as the follower would. */
  apply(entry: LogEntry, seq: number): Promise<unknown>;
  /** The same, for the entries of a rebuild (read from the leader in order, into a copy emptied of the instance). */
  applyFromLeader(entry: LogEntry, seq: number): Promise<unknown>;
  /** The log position of the instance's latest entry in the copy. */
  positionOf(key: InstanceKey): number | undefined;
  knowsEveryEntry(key: InstanceKey): boolean;
  /** Told when an instance was replaced from the leader (what failed of it to apply is in the copy now). */
  replacedInstance(key: string): void;
  note(message: string): void;
  onError(message: string, error: unknown): void;
}

/**
 * Once a copy has applied an instance's partition up to the log's last entry of it (`last`), the
 * copy's position of the instance is that entry's, unless the replica its partition follows diverged
 * from the log's leader (2.9.10): the copy then holds an entry the log never committed (rebuiltIfAhead)
 * or lacks the log's last ones (filledIfBehind), and is mended from the leader (log-repairs.ts reads
 * what it needs). Then a read does not show what the log does not hold, and the instance's next append
 * names the log's position (before, each was refused: 409 for good).
 */
export class CopyMending {
  constructor(private readonly deps: CopyMendingDeps) {}

  /** Mends the instance's copy to the log's `last` entry where it differs; a failure is logged (the next look tries again). */
  async mendedToLog(key: InstanceKey, last: number): Promise<void> {
    // (the quick look first, outside the instance's turn: the copy's own position, not the latest noted in
    // memory, which an own entry left to the follower of a replica that diverged can leave ahead of it)
    if ((this.deps.positionOf(key) ?? 0) === last) return;
    try {
      await this.rebuiltIfAhead(key, last);
      await this.filledIfBehind(key, last);
    } catch (error) {
      this.deps.onError(`could not mend instance ${keyOf(key)} to the log`, error);
    }
  }

  /**
   * The same, asking the log's leader for the instance's last entry first and waiting (`waitMs` at most)
   * for the copy to apply its partition up to it; throws when the log cannot be asked.
   */
  async mendedToLogNow(key: InstanceKey, waitMs: number): Promise<void> {
    const copy = this.deps.copyOf(key);
    if (!copy) return;
    const last = await this.deps.log.lastSeq(key.orgId, key.machine, key.name);
    await copy.appliedTo(last, waitMs);
    await this.mendedToLog(key, last);
  }

  /**
   * Applies the log's entries of the instance the copy lacks at its end, read from the leader, in the
   * instance's turn: the copy has applied its partition past the log's `last` and so should hold it, but
   * the replica it follows lacks them (held other messages at their sequences). The last entry of an
   * instance is named by no later one, so missedEntry does not find it, and every append would name the
   * copy's stale position, refused for good.
   */
  private async filledIfBehind(key: InstanceKey, last: number): Promise<void> {
    const { deps } = this;
    const instance = keyOf(key);
    const copy = deps.copyOf(key);
    if (!copy) return;
    await deps.inTurn(instance, async () => {
      const position = deps.positionOf(key);
      // (no position: behind only if the copy would know of every entry; else it cannot tell)
      if (copy.appliedSeq < last || (position ?? 0) >= last || (position === undefined && !deps.knowsEveryEntry(key))) return;
      const missing = await entriesBetween(deps.log, key, position ?? 0, last);
      if (missing === 'too-many') throw new Error(`this copy lacks too many entries of the instance to read them (after ${position})`);
      if (missing.length === 0) return;
      deps.note(
        `instance ${instance}: this copy's replica of the log lacked its ${missing.length} last entries (after ${position ?? 0}, to ${last}); read from the log's leader`,
      );
      for (const { entry, seq } of missing) {
        await deps.apply(entry, seq);
        deps.positions.noteLatest(instance, seq);
      }
    });
  }

  /**
   * Whether the log's leader counts an entry the copy does not (its first entry of the instance after
   * the position the entry names is this one): then the copy holds an entry of the instance between
   * that the leader does not have there (a replica that diverged under a cut of its leader kept the
   * cut-off owner's appends the quorum never took, or committed entries at other sequences). No answer
   * throws, so that the apply fails and the follower makes it again (passed by, a committed entry would
   * not count, and its record would be lost for good).
   */
  async countsOnLog(entry: LogEntry, seq: number): Promise<boolean> {
    if (entry.after === undefined) return false;
    const { orgId, machine, name } = instanceOfEntry(entry);
    return (await this.deps.log.firstAfter(orgId, machine, name, entry.after)) === seq;
  }

  /**
   * In the instance's turn already: drops the instance's rows from the copy and applies the log's
   * entries of it up to `upTo` again, in order, as the leader holds them; `position` is the copy's.
   * False, and nothing done but an error logged, past MAX_REBUILT_ENTRIES (the entry is then taken as
   * the copy judges it: a follower that failed here would stop its whole partition for good).
   */
  async rebuildInTurn(key: InstanceKey, upTo: number, position: number): Promise<boolean> {
    const { deps } = this;
    const instance = keyOf(key);
    const entries = await entriesBetween(deps.log, key, 0, upTo);
    if (entries === 'too-many') {
      deps.onError(`this copy of instance ${instance} differs from the log, and too many entries to rebuild it from`, undefined);
      return false;
    }
    deps.note(
      `instance ${instance}: this copy held an entry the log's leader does not have between (its position ${position}, the log's entry at ${upTo} counts there); rebuilt from the log's ${entries.length} entries`,
    );
    await this.replaced(key, entries);
    return true;
  }

  /**
   * The copy holds no row of an instance whose last entry the log's leader has at `last` (not a
   * delete), though it applied its partition past it: the replica it follows lacked the instance's
   * create, which no later entry names when the instance has no other (instance-audit.ts). Its entries
   * are read from the leader and applied. False when there was nothing to do.
   */
  async filledIfAbsent(key: InstanceKey, last: number): Promise<boolean> {
    const { deps } = this;
    const instance = keyOf(key);
    const copy = deps.copyOf(key);
    if (!copy) return false;
    return deps.inTurn(instance, async () => {
      if (copy.appliedSeq < last || deps.local.getInstance(key.orgId, key.machine, key.name)) return false;
      if ((deps.positionOf(key) ?? 0) >= last) return false;
      const entries = await entriesBetween(deps.log, key, 0, last);
      if (entries === 'too-many') throw new Error(`this copy lacks instance ${instance}, and too many entries of it to read`);
      if (entries.length === 0) return false;
      deps.note(
        `instance ${instance}: this copy's replica of the log lacked it (its last entry is at ${last}); read its ${entries.length} entries from the log's leader`,
      );
      await this.replaced(key, entries);
      return true;
    });
  }

  /**
   * The copy holds an instance of which the log's leader has no entry at all: the replica it follows
   * kept a create the log never committed (an append its quorum never took, while that replica's
   * server led the stream cut off from the others). Its rows are dropped, and a head held in memory is
   * stale. False when there was nothing to do.
   */
  async droppedIfNotOnLog(key: InstanceKey): Promise<boolean> {
    const { deps } = this;
    const instance = keyOf(key);
    if (!deps.copyOf(key)) return false;
    return deps.inTurn(instance, async () => {
      const position = deps.positionOf(key);
      if (!deps.local.getInstance(key.orgId, key.machine, key.name) || (await deps.log.lastSeq(key.orgId, key.machine, key.name)) !== 0)
        return false;
      deps.note(`instance ${instance}: this copy held it (at ${position ?? 0}) and the log has no entry of it; dropped`);
      await this.replaced(key, []);
      deps.positions.noteRebuilt(instance, 0);
      return true;
    });
  }

  /**
   * Rebuilds the instance from the log's leader whatever the copy holds (instance-audit.ts, an instance
   * whose append failed without a refusal); throws when the log cannot be asked; false past
   * MAX_REBUILT_ENTRIES (logged).
   */
  async rebuiltFromLeader(key: InstanceKey): Promise<boolean> {
    const { deps } = this;
    const instance = keyOf(key);
    const last = await deps.log.lastSeq(key.orgId, key.machine, key.name);
    return deps.inTurn(instance, async () => {
      const entries = await entriesBetween(deps.log, key, 0, last);
      if (entries === 'too-many') {
        deps.onError(`instance ${instance}: an append of it failed, and too many entries to rebuild it from the log`, undefined);
        return false;
      }
      deps.note(`instance ${instance}: an append of it failed without a refusal; rebuilt from the log's ${entries.length} entries`);
      await this.replaced(key, entries);
      deps.positions.noteRebuilt(instance, last);
      return true;
    });
  }

  /** Drops the instance's rows from the copy and applies `entries` (the log's, in order) in their place. */
  private async replaced(key: InstanceKey, entries: Array<{ entry: LogEntry; seq: number }>): Promise<void> {
    const { deps } = this;
    const instance = keyOf(key);
    if (deps.local.getInstance(key.orgId, key.machine, key.name)) await deps.local.deleteInstance(key.orgId, key.machine, key.name);
    deps.positions.forget(instance);
    for (const { entry, seq } of entries) {
      await deps.applyFromLeader(entry, seq);
      deps.positions.noteLatest(instance, seq);
    }
    deps.replacedInstance(instance);
  }

  /**
   * Rebuilds the instance in the copy from the log's leader when the copy holds an entry of it the log
   * never committed (log-repairs.ts, entriesToRebuildFrom): its rows are dropped and the log's entries
   * applied again in order; a head held in memory past the log's last is then stale (LogPositions.rebuilt).
   */
  private async rebuiltIfAhead(key: InstanceKey, lastBefore: number): Promise<void> {
    const { deps } = this;
    const instance = keyOf(key);
    await deps.inTurn(instance, async () => {
      const position = deps.positionOf(key);
      if (position === undefined || position <= lastBefore) return;
      const rebuild = await entriesToRebuildFrom(deps.log, key, position);
      if (rebuild === undefined) return;
      if (rebuild === 'too-many')
        throw new Error(`this copy holds an entry at ${position} the log does not have, and too many to rebuild from`);
      deps.note(
        `instance ${instance}: this copy held an entry at ${position} the log does not have (its last is ${rebuild.last}); rebuilt from the log's ${rebuild.entries.length} entries`,
      );
      await this.replaced(key, rebuild.entries);
      deps.positions.noteRebuilt(instance, rebuild.last);
    });
  }
}
