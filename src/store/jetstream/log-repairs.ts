import type { InstanceHead } from '../instance-store.js';
import { entryOf, instanceOf, keyOf, type LogEntry } from './log-entries.js';
import type { JetStreamTransitionLog } from './transition-log.js';

/**
 * What a partition's copy reads from the TX log's leader to mend what a diverged replica of a 2.9.10
 * stream gave it (bench/JOURNAL.md, 2026-11-30): the entry an entry names that the copy lacks, and an
 * instance's entries when the copy holds one the log never committed. The store applies what these
 * return, in the instance's turn (log-instance-store.ts).
 */

/** How many entries of one instance, each naming the one before, are read back from the log's leader for one the copy follows. */
export const MAX_MISSED_CHAIN = 16;

/** The most entries of one instance a copy that got ahead of the log rebuilds it from, or that it lacks and reads (one question to the log each). */
const MAX_REBUILT_ENTRIES = 10_000;

/**
 * The entry `entry` names (its `after`) when the copy lacks it, read from the stream's leader: a copy
 * following a replica that lacks an instance's entry would apply the entries after it (they count:
 * nothing of the instance came between) without its record in the history. A copy that agrees with
 * the log holds the entry an entry names, so the leader is asked only when this one names a position
 * past the copy's (`position`), or any position when `knowsEveryEntry` (the copy knows the instance has
 * none). Undefined when there is nothing to read, or the answer is not this instance's entry (the
 * writer named a wrong position: the log does not take that, or the copy holds the truth); no answer
 * (the log not reachable now) throws, so that the apply fails and the follower makes it again.
 */
export const missedEntry = async (
  log: JetStreamTransitionLog,
  entry: LogEntry,
  seq: number,
  position: number | undefined,
  knowsEveryEntry: () => boolean,
): Promise<LogEntry | undefined> => {
  const named = entry.after;
  if (named === undefined || named <= 0 || named >= seq) return undefined;
  if (position === undefined ? !knowsEveryEntry() : position >= named) return undefined;
  const key = keyOf(instanceOf(entry));
  let message: Awaited<ReturnType<JetStreamTransitionLog['get']>>;
  try {
    message = await log.get(named);
  } catch (error) {
    // Not passed by: applied without it, the entry would count and the record named be lost for good.
    throw new Error(
      `could not read entry ${named} of instance ${key}, which entry ${seq} names and this copy lacks (${error instanceof Error ? error.message : String(error)})`,
      { cause: error },
    );
  }
  if (!message) return undefined;
  const missed = entryOf(message);
  return keyOf(instanceOf(missed)) === key ? missed : undefined;
};

/**
 * The log's entries of an instance when the copy holds one past the log's last at `position`: the
 * entries the log never committed, which a 2.9.10 server that led the stream and was paused or cut off
 * can keep and hand to a consumer on it (a copy that applied one named its position in every later
 * append, which the log refused: 409 for good). Past the last entry asked before is not enough (the
 * copy may have applied later entries since): it is ahead when the log holds another instance's message
 * at its position, or none (the copy's position past the log's end: a replica that diverged held one
 * message more, and every append was refused, 409 for good), and the instance's last entry, asked
 * after that, is before it. Undefined when not ahead; 'too-many' past MAX_REBUILT_ENTRIES.
 */
export const entriesToRebuildFrom = async (
  log: JetStreamTransitionLog,
  key: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>,
  position: number,
): Promise<{ entries: LoggedEntry[]; last: number } | 'too-many' | undefined> => {
  const { orgId, machine, name } = key;
  const there = await log.get(position);
  // (none there: the copy's position is past the log's end, which only a replica that diverged holds)
  if (there && there.subject === log.subjectOf(orgId, machine, name)) return undefined;
  const last = await log.lastSeq(orgId, machine, name);
  if (position <= last) return undefined;
  const entries = await entriesBetween(log, key, 0, last);
  return entries === 'too-many' ? entries : { entries, last };
};

type LoggedEntry = { entry: LogEntry; seq: number };

/**
 * The instance's entries after stream sequence `after` up to `last`, in order, as the log's leader holds
 * them; 'too-many' past MAX_REBUILT_ENTRIES.
 */
export const entriesBetween = async (
  log: JetStreamTransitionLog,
  key: Pick<InstanceHead, 'orgId' | 'machine' | 'name'>,
  after: number,
  last: number,
): Promise<LoggedEntry[] | 'too-many'> => {
  const entries: LoggedEntry[] = [];
  for (let from = after; entries.length <= MAX_REBUILT_ENTRIES;) {
    const message = await log.nextEntry(key.orgId, key.machine, key.name, from);
    if (!message || message.seq > last) return entries;
    entries.push({ entry: entryOf(message), seq: message.seq });
    from = message.seq;
  }
  return 'too-many';
};

/**
 * Whether an entry counts: it is the instance's first entry after the position it names (`after`),
 * that is, the copy has no entry of the instance between that position and it. The copy's position
 * of the instance when it has one (a head's, or a headless instance's) is its latest entry before this
 * one: the entry counts when that is at or before the position it names. At it in a copy that agrees
 * with the log; before it in one that lacks the entry named (a replica of a 2.9.10 stream that
 * diverged under a partition held another message at that sequence: seen for a fence, and the commit
 * after it, acknowledged, counted in no copy that followed that replica). When the copy has no
 * position, the instance has no entry before, if the follower started at the stream's start and forgot
 * no position; else the log is asked (an instance deleted before this process started: rare), again
 * until it answers.
 */
export const entryCounts = async (
  log: JetStreamTransitionLog,
  entry: LogEntry,
  seq: number,
  position: number | undefined,
  copy: { knowsEveryEntry: () => boolean; stopped: () => boolean; onError: (message: string, error: unknown) => void },
): Promise<boolean> => {
  if (entry.after === undefined) return true;
  if (position !== undefined) return position <= entry.after;
  if (copy.knowsEveryEntry()) return entry.after === 0;
  const { orgId, machine, name } = instanceOf(entry);
  for (let attempt = 0; ; attempt++) {
    try {
      return (await log.firstAfter(orgId, machine, name, entry.after)) === seq;
    } catch (error) {
      if (copy.stopped()) throw error;
      if (attempt === 0)
        copy.onError(`could not ask the TX log whether entry ${seq} of instance ${name} of machine ${machine} counts; asking again`, error);
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
    }
  }
};
