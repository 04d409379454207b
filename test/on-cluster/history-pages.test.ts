// test/history-pages.test.ts on a 3-node cluster (helpers/on-cluster.ts).
import { runOnCluster } from '../helpers/on-cluster.js';

await runOnCluster('history-pages');
