import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { DataDirInUseError, LOCK_FILE, TAKEOVER_DIR, lockDataDir } from '../src/store/lmdb/data-dir-lock.js';
import { call } from './helpers/http.js';
import { entryPoint, removeDir, startNode, tempDataDir } from './helpers/node-process.js';

const run = promisify(execFile);

/** `statehold serve` on a data dir that is already held: it must refuse, not start. */
const serveAgain = async (dataDir: string): Promise<{ code: number; stderr: string }> => {
  try {
    await run(process.execPath, ['--no-node-snapshot', entryPoint, 'serve', '--port', '0', '--data-dir', dataDir, '--admin-key', 'k'], {
      timeout: 20_000,
    });
    return { code: 0, stderr: '' };
  } catch (error) {
    const e = error as { code?: number; stderr?: string };
    return { code: e.code ?? -1, stderr: e.stderr ?? '' };
  }
};

/** Leaves a stale lock socket in `dir`: its process is killed while listening, as by kill -9. */
const leaveStaleSocket = async (dir: string): Promise<void> => {
  const script = `require('net').createServer().listen(${JSON.stringify(LOCK_FILE)}, () => process.kill(process.pid, 'SIGKILL'))`;
  await run(process.execPath, ['-e', script], { cwd: dir }).catch(() => undefined);
};

t.test('one node per data dir: a second serve refuses and names the holder; kill -9 frees the dir', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const first = await startNode({ dataDir });
  await call(first.url, 'POST', '/machines', { token: first.adminKey, body: { slug: 'kept' } });

  const second = await serveAgain(dataDir);
  t.equal(second.code, 1, 'the second node exits 1');
  t.match(
    second.stderr,
    `the data dir ${dataDir} is in use by another statehold process (pid ${first.child.pid})`,
    'and says who holds it',
  );
  t.notMatch(second.stderr, /\n\s+at /, 'without a stack trace');
  t.equal((await call(first.url, 'GET', '/machines/kept', { token: first.adminKey })).status, 200, 'the holder is untouched');

  t.equal(await first.stop('SIGKILL'), 'SIGKILL');
  t.ok(lstatSync(join(dataDir, LOCK_FILE)).isSocket(), 'kill -9 leaves the socket file behind');
  const next = await startNode({ dataDir });
  t.equal(
    (await call(next.url, 'GET', '/machines/kept', { token: next.adminKey })).status,
    200,
    'a new node takes over the stale lock, with the data',
  );
  t.equal(await next.stop('SIGTERM'), 0);
  t.notOk(existsSync(join(dataDir, LOCK_FILE)), 'a clean stop removes the lock');
});

t.test('lockDataDir', async (t) => {
  t.test('a long data dir path works: the socket is not named by its absolute path (108-byte limit)', async (t) => {
    const base = tempDataDir();
    t.teardown(() => removeDir(base));
    const dir = join(base, 'd'.repeat(60), 'e'.repeat(60));
    const lock = await lockDataDir(dir);
    t.ok(lstatSync(join(dir, LOCK_FILE)).isSocket(), 'the socket is inside the data dir');
    await t.rejects(lockDataDir(dir), DataDirInUseError, 'a second lock in the same process is refused too');
    await lock.release();
    t.notOk(existsSync(join(dir, LOCK_FILE)), 'released');
    const again = await lockDataDir(dir);
    await again.release();
  });

  t.test('releasing never removes a file of the same name in the working directory', async (t) => {
    const dir = tempDataDir();
    const elsewhere = tempDataDir();
    t.teardown(() => {
      removeDir(dir);
      removeDir(elsewhere);
    });
    writeFileSync(join(elsewhere, LOCK_FILE), 'not ours');
    const lock = await lockDataDir(dir);
    const cwd = process.cwd();
    process.chdir(elsewhere);
    try {
      await lock.release();
    } finally {
      process.chdir(cwd);
    }
    t.equal(readFileSync(join(elsewhere, LOCK_FILE), 'utf8'), 'not ours');
    t.notOk(existsSync(join(dir, LOCK_FILE)));
  });

  t.test('a regular file in the way is reported, not deleted', async (t) => {
    const dir = tempDataDir();
    t.teardown(() => removeDir(dir));
    writeFileSync(join(dir, LOCK_FILE), 'someone else');
    await t.rejects(lockDataDir(dir), /statehold\.lock is in the way and is not a socket; remove it/);
    t.equal(readFileSync(join(dir, LOCK_FILE), 'utf8'), 'someone else');
  });

  t.test('a data dir that refuses sockets is run unguarded, with the reason, rather than not at all', async (t) => {
    const dir = tempDataDir();
    // Root ignores permission bits, not the immutable attribute; other users are stopped by the bits.
    const asRoot = process.getuid?.() === 0;
    try {
      if (asRoot) execFileSync('chattr', ['+i', dir], { stdio: 'ignore' });
      else chmodSync(dir, 0o555);
    } catch {
      t.skip('cannot make a directory refuse new files here', () => {});
      removeDir(dir);
      return;
    }
    t.teardown(() => {
      if (asRoot) execFileSync('chattr', ['-i', dir], { stdio: 'ignore' });
      else chmodSync(dir, 0o755);
      removeDir(dir);
    });
    const lock = await lockDataDir(dir);
    t.match(lock.unguarded, /could not create .*statehold\.lock \((EPERM|EACCES)\)/);
    await lock.release();
  });

  t.test('nodes starting at the same instant against a stale socket: exactly one takes it over', async (t) => {
    const dir = tempDataDir();
    t.teardown(() => removeDir(dir));
    for (let round = 0; round < 5; round++) {
      await leaveStaleSocket(dir);
      t.ok(lstatSync(join(dir, LOCK_FILE)).isSocket(), `round ${round}: a stale socket is in place`);
      const outcomes = await Promise.allSettled([lockDataDir(dir), lockDataDir(dir), lockDataDir(dir)]);
      const held = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
      t.equal(held.length, 1, `round ${round}: one of three holds the lock`);
      for (const o of outcomes) if (o.status === 'rejected') t.type(o.reason, DataDirInUseError, 'the others are told it is in use');
      t.notOk(existsSync(join(dir, TAKEOVER_DIR)), 'no takeover marker is left behind');
      await Promise.all(held.map((lock) => lock.release()));
    }
  });

  t.test('a takeover marker left by a node that died while taking over is removed once old', async (t) => {
    const dir = tempDataDir();
    t.teardown(() => removeDir(dir));
    await leaveStaleSocket(dir);
    mkdirSync(join(dir, TAKEOVER_DIR));
    await t.rejects(lockDataDir(dir), DataDirInUseError, 'a fresh marker means another node is taking over now');
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(dir, TAKEOVER_DIR), old, old);
    const lock = await lockDataDir(dir);
    t.ok(lstatSync(join(dir, LOCK_FILE)).isSocket());
    t.notOk(existsSync(join(dir, TAKEOVER_DIR)));
    await lock.release();
  });

  t.test('the data dir is created when missing', async (t) => {
    const base = tempDataDir();
    t.teardown(() => removeDir(base));
    const dir = join(base, 'new', 'dir');
    const lock = await lockDataDir(dir);
    t.ok(existsSync(join(dir, LOCK_FILE)));
    await lock.release();
    mkdirSync(dir, { recursive: true });
  });
});
