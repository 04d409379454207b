import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { freePort } from '../cluster/nats-servers.mjs';
import { defaultWorkerNodeArgs } from '../src/sandbox/index.js';
import { call } from './helpers/http.js';
import { entryPoint, removeDir, shim, startNode, tempDataDir } from './helpers/node-process.js';

const run = promisify(execFile);

t.test('first start generates the operator key and bootstrap org, printed once; both survive a restart', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const first = await startNode({ dataDir, generatedAdminKey: true });
  const key = /shown only this once: (shadm_[A-Za-z0-9_-]+)/.exec(first.output())?.[1];
  t.ok(key, 'the key is printed');
  t.match(
    first.output(),
    new RegExp(`curl -H "Authorization: Bearer ${key}" http://127\\.0\\.0\\.1:${first.port}/orgs`),
    'with a one-line example',
  );
  t.match(first.output(), /created the bootstrap org org_/);
  const orgs = await call(first.url, 'GET', '/orgs', { token: key });
  t.equal(orgs.status, 200);
  const created = await call(first.url, 'POST', '/keys', { token: key, body: { name: 'k', use: 'production' } });
  const secret = created.body.key as string;
  await call(first.url, 'POST', '/machines', { token: key, body: { slug: 'kept' } });
  t.equal(await first.stop('SIGTERM'), 0, 'SIGTERM exits 0');
  t.match(first.output(), /stopped cleanly/);

  // Every file under the data dir: LMDB, the master key, the write-ahead log's directory.
  const stored = (readdirSync(dataDir, { recursive: true }) as string[])
    .map((f) => join(dataDir, f))
    .filter((path) => statSync(path).isFile())
    .map((path) => readFileSync(path).toString('latin1'))
    .join('');
  t.notOk(stored.includes(secret), 'key secrets are not stored in plain text');
  t.notOk(stored.includes(key as string), 'the operator key is not stored in plain text');
  t.equal(statSync(join(dataDir, 'master.key')).mode & 0o777, 0o600, 'the master key file is private');

  const second = await startNode({ dataDir, generatedAdminKey: true });
  t.teardown(() => second.stop());
  t.notMatch(second.output(), /shadm_/, 'the key is not printed again');
  t.notMatch(second.output(), /bootstrap org/, 'no second bootstrap org');
  const again = await call(second.url, 'GET', '/orgs', { token: key });
  t.equal(again.status, 200);
  t.same(again.body.orgs, orgs.body.orgs);
  t.equal((await call(second.url, 'GET', '/machines/kept', { token: key })).status, 200, 'acknowledged writes survived');
});

t.test('a configured admin key replaces the stored one; environment variables apply, flags win', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const node = await startNode({
    dataDir,
    env: { STATEHOLD_BILLING_URL: 'https://env.example.com/b', STATEHOLD_PAGE_SIZE: '1' },
    args: ['--page-size', '2'],
  });
  t.teardown(() => node.stop());
  t.notMatch(node.output(), /shadm_/, 'no key is generated when one is configured');
  const admin = node.adminKey as string;
  t.equal((await call(node.url, 'GET', '/billing', { token: admin })).body.url, 'https://env.example.com/b', 'env applies');
  for (const slug of ['a', 'b', 'c']) await call(node.url, 'POST', '/machines', { token: admin, body: { slug } });
  t.equal((await call(node.url, 'GET', '/machines', { token: admin })).body.machines.length, 2, 'the flag beats the env');
  t.equal((await call(node.url, 'GET', '/orgs', { token: 'shadm_other' })).status, 403);
});

t.test('a token with the configured public URL as audience is accepted', async (t) => {
  const node = await startNode({ args: ['--public-url', 'https://statehold.example.com/'] });
  t.teardown(() => node.stop());
  t.equal((await call(node.url, 'GET', '/billing', { token: node.adminKey })).body.url, 'https://statehold.example.com/billing-portal');
});

t.test('without --public-url, the code upload URL is the host the request came to; with it, the public URL', async (t) => {
  const uploadUrl = async (node: { url: string; adminKey?: string }, host?: string) => {
    await call(node.url, 'POST', '/machines', { token: node.adminKey, body: { slug: 'm' } });
    const answer = await call(node.url, 'POST', '/machines/m/v', {
      token: node.adminKey,
      body: { clientInfo: 'x' },
      headers: host === undefined ? {} : { host },
    });
    t.equal(answer.status, 200, answer.text);
    return answer.body.codeUploadUrl as string;
  };
  const node = await startNode();
  t.teardown(() => node.stop());
  // (a node on 0.0.0.0, or behind a port mapping, is reached at an address its own URL does not name)
  t.equal(await uploadUrl(node, 'statehold.internal:9443'), 'http://statehold.internal:9443/uploads/code');
  t.equal(await uploadUrl(node, '[::1]:8787'), 'http://[::1]:8787/uploads/code');
  t.equal(await uploadUrl(node), `${node.url}/uploads/code`, "the client's own Host");
  for (const hostile of ['evil.example/x?', 'a b', 'x@y:1', 'h:99999999'])
    t.equal(await uploadUrl(node, hostile), `${node.url}/uploads/code`, `a Host that is not a plain host: the node's URL (${hostile})`);

  const billing = await call(node.url, 'GET', '/billing', { token: node.adminKey, headers: { host: 'statehold.internal:9443' } });
  t.equal(billing.body.url, 'http://statehold.internal:9443/billing-portal', 'so does the default billing link');

  const configured = await startNode({ args: ['--public-url', 'https://statehold.example.com/'] });
  t.teardown(() => configured.stop());
  t.equal(await uploadUrl(configured, 'statehold.internal:9443'), 'https://statehold.example.com/uploads/code');
});

t.test('--help documents the settings; bad flags exit 2 with a message', async (t) => {
  const help = await run(process.execPath, ['--no-node-snapshot', entryPoint, '--help']);
  for (const word of [
    'serve',
    '--port',
    '--host',
    '--data-dir',
    '--commit-log',
    'STATEHOLD_COMMIT_LOG',
    '--public-url',
    '--admin-key',
    'STATEHOLD_PORT',
    'STATEHOLD_DATA_DIR',
    'STATEHOLD_PUBLIC_URL',
    'STATEHOLD_ADMIN_KEY',
    'STATEHOLD_MASTER_KEY',
    'SIGTERM',
    '/health',
  ]) {
    t.match(help.stdout, word);
  }
  for (const args of [
    ['serve', '--port', 'eighty'],
    ['serve', '--bogus'],
    ['serve', '--public-url', 'ftp://x'],
    ['serve', '--commit-log', 'fsync'],
    ['serve', '--admin-key', 'has.a.dot'],
    ['serve', '--admin-key', 'with space'],
    ['launch'],
  ]) {
    const failed = await run(process.execPath, ['--no-node-snapshot', entryPoint, ...args]).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    t.equal(failed.code, 2, args.join(' '));
    t.match(failed.stderr, /statehold: /);
    if (args[1] === '--admin-key') t.notMatch(failed.stderr, args[2] as string, 'the key is not echoed');
  }
});

t.test('a second node on a port in use fails to start and says so (it does not share the port)', async (t) => {
  // (a port given, as an operator gives one: uWS shared a given port, not one the kernel picked for port 0)
  const first = await startNode({ args: ['--port', String(await freePort())] });
  t.teardown(() => first.stop());
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const second = await run(
    process.execPath,
    ['--no-node-snapshot', entryPoint, 'serve', '--port', String(first.port), '--data-dir', dataDir],
    { timeout: 30_000 },
  ).then(
    () => ({ code: 0, stderr: '' }),
    (error: { code: number; stderr: string }) => error,
  );
  t.not(second.code, 0, 'the second node exits');
  t.match(second.stderr, new RegExp(`could not listen on 127\\.0\\.0\\.1:${first.port} \\(is another process using that port\\?\\)`));
  t.equal((await fetch(`${first.url}/health`)).status, 200, 'the first goes on');
});

t.test('STATEHOLD_SANDBOX_NODE_ARGS reaches the sandbox worker; anything but flags is refused', async (t) => {
  const node = await startNode({ env: { STATEHOLD_SANDBOX_NODE_ARGS: ' --stack-size=900   --max-semi-space-size=2 ' } });
  t.teardown(() => node.stop());
  const pid = node.child.pid as number;
  // The main worker is forked at start; wait for it to appear among the node's children.
  let workers: string[][] = [];
  for (let i = 0; i < 100 && workers.length === 0; i++) {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    workers = children
      .map((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0'))
      .filter((argv) => argv.some((arg) => arg.endsWith('sandbox-worker.js')));
    if (workers.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.equal(workers.length, 1, 'one sandbox worker runs');
  const argv = workers[0] as string[];
  t.same(
    argv.slice(
      1,
      argv.findIndex((arg) => arg.endsWith('sandbox-worker.js')),
    ),
    ['--no-node-snapshot', ...defaultWorkerNodeArgs(), '--stack-size=900', '--max-semi-space-size=2'],
    'with the flags given, after its own (the operator can undo a default)',
  );
  t.equal((await call(node.url, 'GET', '/health')).status, 200);

  for (const bad of ['--trace-gc; rm -rf /', '--trace-gc;', 'inspect', '--stack-size=900 -e']) {
    const failed = await run(process.execPath, ['--no-node-snapshot', entryPoint, 'serve', '--port', '0'], {
      env: { ...process.env, STATEHOLD_SANDBOX_NODE_ARGS: bad },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    t.equal(failed.code, 2, `refused: ${bad}`);
    t.match(failed.stderr, /STATEHOLD_SANDBOX_NODE_ARGS takes Node flags/);
  }
});

t.test('the bin shim runs the built CLI (what npx statehold runs)', async (t) => {
  const help = await run(shim, ['help']);
  t.match(help.stdout, /statehold serve/);
});
