import type { DeliveredMessages } from './delivered-messages.js';
import type { LocalCopy } from './held-partition-reads.js';
import { keyOf } from './log-entries.js';
import type { LogPositions } from './log-positions.js';

/** What dropping partitions uses of a cluster node's instance store (log-instance-store.ts). */
export interface PartitionDropsDeps {
  local: LocalCopy;
  positions: LogPositions;
  delivered: DeliveredMessages;
  /** Whether the instance's partition is among those dropped and still given up. */
  inDropped(orgId: string, machine: string, name: string): boolean;
  /** Runs `work` in the instance's turn (after whatever applies to its rows already). */
  inTurn<T>(key: string, work: () => Promise<T>): Promise<T>;
}

/** Drops every row of given-up partitions from the local store: heads, histories, indexes, timers, and their senders' outbox entries. */
export const droppedPartitions = async (partitions: ReadonlySet<number>, deps: PartitionDropsDeps): Promise<void> => {
  if (partitions.size === 0) return;
  const { local, positions, delivered, inDropped, inTurn } = deps;
  // (only the keys to drop are kept while the store is read: it may hold many more)
  const keys: Array<[string, string, string]> = [];
  for (const [orgId, machine, name] of local.instanceKeys()) if (inDropped(orgId, machine, name)) keys.push([orgId, machine, name]);
  for (const [orgId, machine, name] of keys) {
    // In the instance's turn, and only if its partition is still given up: one taken again meanwhile
    // (a flapping view) is being caught up by a new follower, whose applies must not lose their rows.
    await inTurn(keyOf({ orgId, machine, name }), async () => {
      if (!inDropped(orgId, machine, name)) return;
      await local.deleteInstance(orgId, machine, name);
      positions.forget(keyOf({ orgId, machine, name }));
    });
  }
  for (const message of local.listOutbox(Number.MAX_SAFE_INTEGER)) {
    if (!inDropped(message.orgId, message.from.machine, message.from.name)) continue;
    delivered.forget(message.id);
    await local.removeOutbox(message);
  }
};
