import type { MachineVersionRecord } from '../domain/records.js';
import type { InstanceState } from '../runtime/instance-writes.js';

/** The `State` object of create, read and send-event responses (wire-protocol §5), from what those answer. */
export const stateView = (head: InstanceState) => {
  const view: { state: unknown; publicContext?: unknown; tags: string[]; done: boolean; ts: number } = {
    state: head.state,
    tags: head.tags,
    done: head.done,
    ts: head.ts,
  };
  // Only context.public leaves the instance, and only when the machine keeps one.
  if (Object.prototype.hasOwnProperty.call(head.context, 'public')) view.publicContext = head.context.public;
  return view;
};

/** MachineVersionInfo (wire-protocol §5); a version that vanished is shown by id alone. */
export const versionInfo = (versionId: string, record: MachineVersionRecord | undefined) => ({
  id: versionId,
  createdAt: record?.createdAt ?? '',
  clientInfo: record?.clientInfo ?? '',
});
