import { StateBackedClient } from '@statebacked/client';
import type { NodeProcess } from './node-process.js';

/** An operator client on the node (in the org given, else its first), with a machine whose current version is `code`. */
export const machineWithVersion = async (node: NodeProcess, machine: string, code: string, orgId?: string) => {
  const operator = new StateBackedClient(node.adminKey as string, { apiHost: node.url, ...(orgId ? { orgId } : {}) });
  await operator.machines.create(machine);
  const { machineVersionId } = await operator.machineVersions.create(machine, { clientInfo: `${machine}-v1`, makeCurrent: true, code });
  return { operator, machineVersionId };
};
