// Uploads the cart machine through the real State Backed client and makes it current.
import { StateBackedClient } from '@statebacked/client';
import { MACHINE_CODE } from './cart-machine.mjs';

export const setupMachine = async ({ url, adminKey, machine }) => {
  const client = new StateBackedClient(adminKey, { apiHost: url });
  await client.machines.create(machine);
  const version = await client.machineVersions.create(machine, { clientInfo: 'bench', makeCurrent: true, code: MACHINE_CODE });
  return version.machineVersionId;
};
