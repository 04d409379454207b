import type { CommitEffects, InstanceHead } from '../instance-store.js';
import type { DeliveredMessages } from './delivered-messages.js';
import type { LocalCopy } from './held-partition-reads.js';
import type { LogEntry } from './log-entries.js';

/** What applying an entry tells beside the rows it writes (LogInstanceStore's listeners). */
export interface EntryEffectsHooks {
  /** A head with pending timers was written. */
  timers(head: InstanceHead): void;
  /** A commit put messages in the outbox. */
  outbox(effects: CommitEffects): void;
  /** A fence of a request by a node. */
  fence(requestId: string, by: string): void;
}

/**
 * Writes what one log entry that counts does to a partition's copy at stream sequence `seq`, given the
 * instance's head there now (`current`). Resolves 'headed' when the instance has a head in the copy
 * after it, 'headless' when it has none (deleted, or an entry that needs a head found none): its
 * position is then kept beside the heads (LogPositions), which the caller does.
 */
export const applyEntryEffects = async (
  local: LocalCopy,
  delivered: DeliveredMessages,
  hooks: EntryEffectsHooks,
  entry: LogEntry,
  seq: number,
  current: InstanceHead | undefined,
): Promise<'headed' | 'headless'> => {
  switch (entry.kind) {
    case 'create': {
      // (a create that counts finds no head; one that finds it changes nothing but the position)
      if (current) {
        await local.replaceHead({ ...current, logSeq: seq }, current);
        return 'headed';
      }
      await withEffects(delivered, hooks, entry, () => local.createInstance({ ...entry.head, logSeq: seq }, entry.history, entry.effects));
      return 'headed';
    }
    case 'commit': {
      if (!current) return 'headless';
      await withEffects(delivered, hooks, entry, () => local.commit({ ...entry.head, logSeq: seq }, current, entry.history, entry.effects));
      return 'headed';
    }
    case 'head': {
      if (!current) return 'headless';
      await local.replaceHead({ ...entry.head, logSeq: seq }, current);
      hooks.timers(entry.head);
      return 'headed';
    }
    case 'received': {
      if (!current) return 'headless';
      await local.markReceived(entry.orgId, entry.machine, entry.name, entry.messageId);
      // (the head's log position moves too, so the next append expects this entry)
      await local.replaceHead({ ...current, logSeq: seq }, current);
      delivered.delivered(entry.messageId);
      return 'headed';
    }
    case 'fence': {
      hooks.fence(entry.requestId, entry.by);
      if (!current) return 'headless';
      // (the head's log position moves, so that the next append expects the fence)
      await local.replaceHead({ ...current, logSeq: seq }, current);
      return 'headed';
    }
    case 'delete':
      await local.deleteInstance(entry.orgId, entry.machine, entry.name);
      return 'headless';
  }
};

/** Writes a create's or a commit's rows, with what its effects tell: outbox entries placed, a message delivered, timers, the outbox. */
const withEffects = async (
  delivered: DeliveredMessages,
  hooks: EntryEffectsHooks,
  entry: Extract<LogEntry, { kind: 'create' | 'commit' }>,
  write: () => Promise<unknown>,
): Promise<void> => {
  delivered.sending(entry.effects);
  await write();
  delivered.sent(entry.effects);
  delivered.delivered(entry.effects.receivedMessageId);
  hooks.timers(entry.head);
  hooks.outbox(entry.effects);
};
