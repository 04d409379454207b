import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { removeDir, tempDataDir } from './helpers/node-process.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';
import { repoRoot } from './helpers/paths.js';

/** `make cluster-up` / `cluster-down` (cluster/launch.mjs): a working cluster, then nothing left running. */

const skip = natsMissing();
const run = promisify(execFile);
const launcher = join(repoRoot, 'cluster', 'launch.mjs');
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

t.test(
  'up prints the URLs and the key, every URL serves the same data, down stops every process',
  { skip, timeout: 120_000 },
  async (t) => {
    const dir = tempDataDir();
    t.teardown(() => removeDir(dir));
    const env = { ...process.env, CLUSTER_DIR: dir, NODES: '2' };
    const up = await run(process.execPath, [launcher, 'up'], { env, timeout: 90_000 });
    const urls = [...up.stdout.matchAll(/node-\d \(pid \d+\) at (http:\/\/127\.0\.0\.1:\d+)/g)].map((m) => m[1] as string);
    const key = /operator key: (shadm_\S+)/.exec(up.stdout)?.[1] as string;
    t.equal(urls.length, 2, 'two node URLs printed');
    t.ok(key, 'and the operator key');
    const state = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as { pids: number[] };
    t.teardown(() => state.pids.forEach((pid) => alive(pid) && process.kill(pid, 'SIGKILL')));
    const [a, b] = urls.map((url) => new StateBackedClient(key, { apiHost: url })) as [StateBackedClient, StateBackedClient];
    await a.machines.create('m');
    t.same(
      (await b.machines.list()).machines.map((m) => m.slug),
      ['m'],
      'made on one node, listed on the other',
    );
    const again = await run(process.execPath, [launcher, 'up'], { env }).catch((error: { stderr: string }) => error);
    t.match((again as { stderr: string }).stderr, /still running/, 'a second up while one runs is refused');
    const down = await run(process.execPath, [launcher, 'down'], { env, timeout: 60_000 });
    t.match(down.stdout, /stopped 3 processes/);
    t.same(state.pids.filter(alive), [], 'nothing left running');
  },
);

t.test('a node started before its nats-server waits for it, then serves', { skip, timeout: 120_000 }, async (t) => {
  const nats = await startNats(1);
  t.teardown(() => nats.stop());
  await nats.kill(0, 'SIGTERM');
  // (started again on its port and store while the node is already trying to connect)
  const back = new Promise((resolve) => setTimeout(resolve, 3_000)).then(() => nats.restart(0));
  const startedAt = Date.now();
  const [node] = await startClusterNodes(t, nats, ['n1'], { adminKey: 'late-nats-admin' });
  await back;
  t.ok(Date.now() - startedAt >= 3_000, 'the node listened only once NATS was there');
  const client = new StateBackedClient('late-nats-admin', { apiHost: node!.url });
  await client.machines.create('after-nats');
  t.match(await client.machines.list(), { machines: [{ slug: 'after-nats' }] }, 'and serves');
});
