// Uploads a machine (the cart unless `code` says otherwise) through the real State Backed client and makes
// it current, then makes the credential the load uses: a token signed with a `production` key, as an
// application's backend would.
import { StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import { MACHINE_CODE } from './cart-machine.mjs';

export const setupMachine = async ({ url, adminKey, machine, code = MACHINE_CODE, clientInfo = 'bench' }) => {
  const client = new StateBackedClient(adminKey, { apiHost: url });
  await client.machines.create(machine);
  const version = await client.machineVersions.create(machine, { clientInfo, makeCurrent: true, code });
  const key = await client.keys.create({ name: 'bench', use: 'production' });
  const token = await signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: 'bench' }, { expires: { in: '2h' } });
  return { machineVersionId: version.machineVersionId, token };
};
