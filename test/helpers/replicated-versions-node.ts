import type { Test } from 'tap';
import { type MetaOp, applyMetaOp } from '../../src/store/jetstream/meta-ops.js';
import { JetStreamOpLog } from '../../src/store/jetstream/op-log.js';
import { ReplicatedCatalog } from '../../src/store/jetstream/replicated-catalog.js';
import { ReplicatedVersionStore, openCodeStore } from '../../src/store/jetstream/replicated-versions.js';
import { localNode, type NatsServers } from './nats.js';

/**
 * A node's replicated catalog and version store, for store tests on a real nats-server: a local node
 * (nats.ts localNode) whose LMDB stores follow the META log (shared by the catalog and the versions)
 * from its start, the code travelling through the object store bucket. A failure the log or the
 * stores report fails the test.
 */
export const replicatedVersionsNode = async (t: Test, nats: NatsServers, name: string) => {
  const fail = (message: string, error: unknown) => t.fail(`${message}: ${String(error)}`);
  const { store, nc, beforeClose } = await localNode(t, nats, name);
  const code = await openCodeStore(nc, { cluster: 'c', replicas: 1 });
  const log = await JetStreamOpLog.open<MetaOp>(
    nc,
    { cluster: 'c', name: 'META', replicas: 1, from: 1 },
    applyMetaOp(store.catalog, store.versions, code, store.instances, fail),
    fail,
  );
  beforeClose(() => log.close());
  return {
    store,
    log,
    code,
    catalog: new ReplicatedCatalog(store.catalog, log),
    versions: new ReplicatedVersionStore(store.versions, log, code, fail),
  };
};
