import { prettyId } from '../domain/ids.js';
import type { InstanceHead, OutboxMessage } from '../store/instance-store.js';
import type { StepEffects } from './step-effects.js';

let counter = 0;

/**
 * Turns a request's effects into outbox messages for the sender's commit: spawns first (a child must
 * exist before messages reach it), then sends in the order the machine made them. `sendParent` goes to
 * the instance that spawned this one; without one it has nowhere to go and is reported.
 */
export const outboxMessages = (
  sender: InstanceHead,
  effects: StepEffects,
  now: number,
  orphan: (type: string) => void,
): OutboxMessage[] => {
  const base = (to: { machine: string; name: string }) => ({
    id: prettyId('msg'),
    orgId: sender.orgId,
    position: [now, counter++] as [number, number],
    from: { machine: sender.machine, name: sender.name },
    // (the receiver's owner may be another node, whose copy of the sender can lag behind this commit)
    ...(sender.madeDepth ? { fromMadeDepth: sender.madeDepth } : {}),
    to,
    attempts: 0,
    nextAttemptAt: now,
  });
  const messages: OutboxMessage[] = [];
  for (const spawn of effects.spawns) {
    const details: OutboxMessage['spawn'] = {};
    if (spawn.machineVersionId !== undefined) details.versionId = spawn.machineVersionId;
    if (spawn.context !== undefined) details.context = spawn.context;
    messages.push({ ...base({ machine: spawn.machineName, name: spawn.machineInstanceName }), kind: 'spawn', spawn: details });
  }
  for (const send of effects.sends) {
    const to = send.to === 'parent' ? sender.parent : { machine: send.to.machineName, name: send.to.machineInstanceName };
    if (!to) {
      orphan(send.event.type);
      continue;
    }
    messages.push({ ...base(to), kind: 'send', event: send.event });
  }
  return messages;
};
