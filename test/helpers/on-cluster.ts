import t from 'tap';
import { natsServerAvailable } from '../../cluster/nats-servers.mjs';

/**
 * Runs a drop-in suite (test/<suite>.test.ts) on a 3-node cluster (helpers/cluster-deployment.ts) as
 * a test file of its own, so `make test` runs the core drop-in suites in its one tap run, beside the
 * other files, instead of in a second run after them (whose last files ran alone on the host's
 * second core). The deployment is chosen when helpers/node-process.ts is first loaded: the suite is
 * imported after the environment says `cluster`, and nothing here imports that module before.
 */
export const runOnCluster = async (suite: string): Promise<void> => {
  if (!natsServerAvailable()) {
    t.plan(0, 'nats-server is not installed (apt-get install nats-server): the drop-in suite was not run on a cluster');
    return;
  }
  process.env.STATEHOLD_TEST_DEPLOYMENT = 'cluster';
  await import(`../${suite}.test.js`);
};
