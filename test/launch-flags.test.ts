import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { shimNodeArgs } from '../bench/lib/server-process.mjs';
import { call } from './helpers/http.js';
import { removeDir, startNode } from './helpers/node-process.js';
import { repoRoot } from './helpers/paths.js';

t.test("the node's Node flags are the same wherever it is started from", async (t) => {
  const fromShim = shimNodeArgs(repoRoot) as string[];
  t.ok(fromShim.includes('--no-node-snapshot'), 'isolated-vm needs --no-node-snapshot');
  t.ok(
    fromShim.some((flag) => /^--initial-old-space-size=\d+$/.test(flag)),
    'the old-generation floor (docs/configuration.md)',
  );
  const makefile = readFileSync(join(repoRoot, 'Makefile'), 'utf8');
  const serveArgs = /^SERVE_NODE_ARGS \?= (.*)$/m.exec(makefile)?.[1];
  t.same(serveArgs?.split(' '), fromShim, '`make run` passes the flags of bin/statehold.js');
  t.match(makefile, /^run: .*\n\t\$\(NODE\) \$\(SERVE_NODE_ARGS\) dist\/bin\/statehold\.js serve/m, 'and uses them');
});

t.test('`statehold serve` started through the shim runs with those flags', async (t) => {
  const node = await startNode({ viaShim: true });
  t.teardown(() => removeDir(node.dataDir));
  const pid = node.child.pid as number;
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const script = argv.findIndex((arg) => arg.endsWith(join('bin', 'statehold.js')));
  t.same(argv.slice(1, script), shimNodeArgs(repoRoot), 'the process (env execs node in place) has them before the script');
  t.equal((await call(node.url, 'GET', '/health')).status, 200);
  t.equal(await node.stop('SIGTERM'), 0);
});
