/**
 * One node per data dir. LMDB lets several processes open the same files, but two nodes on one data
 * dir would each run the same instances, fire the same timers and deliver the same outbox messages:
 * sequence fencing keeps every history linear, not exactly-once delivery. So the node holds a lock for
 * as long as it lives.
 *
 * The lock is a unix socket, `statehold.lock` in the data dir, that the node listens on. The kernel
 * closes it whenever the process ends, kill -9 included, which leaves a socket file nobody listens on:
 * the next start finds it refused, removes it and takes over (one node at a time: see takeOver). (Node has no flock(), and a pid file
 * cannot tell a dead owner from a reused pid.) A socket path is also seen by other containers that mount
 * the same volume, which an abstract socket would not be.
 *
 * Socket paths are limited to 108 bytes and libuv silently truncates longer ones, so the socket is
 * bound, probed and closed by its short name relative to the data dir, with the working directory
 * switched for the duration of the (synchronous) bind, connect or close call.
 */
import { lstatSync, mkdirSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';

export const LOCK_FILE = 'statehold.lock';
/**
 * Made (mkdir is atomic) by the one node that replaces a stale socket, so two nodes starting at the
 * same instant cannot both remove it: the second would remove the first one's new, live socket.
 */
export const TAKEOVER_DIR = 'statehold.lock.takeover';
/** A takeover marker older than this was left by a node that died while taking over. */
const TAKEOVER_STALE_MS = 10_000;

/** How long a probe waits for the holder to accept a connection before calling the lock held anyway. */
const PROBE_TIMEOUT_MS = 2_000;

export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holderPid: number | undefined,
  ) {
    super(
      `the data dir ${dataDir} is in use by another statehold process${holderPid !== undefined ? ` (pid ${holderPid})` : ''}: ` +
        'stop it or give this node its own --data-dir (one node per data dir)',
    );
    this.name = 'DataDirInUseError';
  }
}

interface DataDirLock {
  /**
   * Why the data dir could not be locked, when the file system refuses unix sockets (some network
   * and host-mounted file systems do): the node then runs unguarded rather than not at all.
   */
  readonly unguarded?: string;
  /** Stops listening and removes the socket file. */
  release(): Promise<void>;
}

export const lockDataDir = async (dataDir: string): Promise<DataDirLock> => {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const lock = await tryListen(dir);
  if (lock) return lock;
  const holder = await probe(dir);
  if (holder.held) throw new DataDirInUseError(dir, holder.pid);
  return takeOver(dir);
};

/** Listens on the socket: the lock, or undefined when a file of that name is there (EADDRINUSE). */
const tryListen = async (dir: string): Promise<DataDirLock | undefined> => {
  const server = net.createServer((socket) => socket.end(JSON.stringify({ pid: process.pid })));
  const listened = await listenIn(dir, server);
  if (listened === 'listening') {
    // The lock must never keep the process alive by itself.
    server.unref();
    return { release: () => release(dir, server) };
  }
  if (listened === 'EADDRINUSE') return undefined;
  return { unguarded: `could not create ${join(dir, LOCK_FILE)} (${listened})`, release: async () => undefined };
};

/**
 * Replaces a socket left by a process that died, holding the takeover marker from the probe to the
 * listen: while the stale file is there no node can bind the name, and only the marker's holder removes
 * it, so no node ever removes another's live socket.
 */
const takeOver = async (dir: string): Promise<DataDirLock> => {
  const marker = join(dir, TAKEOVER_DIR);
  try {
    mkdirSync(marker);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if (!olderThan(marker, TAKEOVER_STALE_MS)) throw new DataDirInUseError(dir, undefined);
    rmdirSync(marker);
    return takeOver(dir);
  }
  try {
    // Probed again under the marker: another node may have replaced it since the first probe.
    const holder = await probe(dir);
    if (holder.held) throw new DataDirInUseError(dir, holder.pid);
    removeStale(dir);
    const lock = await tryListen(dir);
    if (lock) return lock;
    // A node that found no file at all bound the name between the removal and the listen.
    throw new DataDirInUseError(dir, (await probe(dir)).pid);
  } finally {
    rmdirSync(marker);
  }
};

const olderThan = (path: string, ms: number): boolean => {
  try {
    return Date.now() - statSync(path).mtimeMs > ms;
  } catch {
    return true;
  }
};

/** Runs `fn` with the data dir as working directory, so the socket is named by its short relative path. */
const inDir = <T>(dir: string, fn: () => T): T => {
  const previous = process.cwd();
  process.chdir(dir);
  try {
    return fn();
  } finally {
    process.chdir(previous);
  }
};

const listenIn = (dir: string, server: net.Server): Promise<'listening' | string> =>
  new Promise((done) => {
    server.once('listening', () => done('listening'));
    server.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
    inDir(dir, () => server.listen(LOCK_FILE));
  });

/** Connects to the socket: accepted means a live holder (it says its pid); refused means a stale file. */
const probe = (dir: string): Promise<{ held: boolean; pid?: number }> =>
  new Promise((done) => {
    let text = '';
    const socket = inDir(dir, () => net.connect(LOCK_FILE));
    const timer = setTimeout(() => finish({ held: true }), PROBE_TIMEOUT_MS);
    const finish = (outcome: { held: boolean; pid?: number }) => {
      clearTimeout(timer);
      socket.destroy();
      done(outcome);
    };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('end', () => finish({ held: true, ...pidOf(text) }));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // ECONNREFUSED: nobody listens (the holder died). ENOENT: removed meanwhile. Anything else, such
      // as a regular file in the way, is reported rather than deleted.
      if (error.code === 'ECONNREFUSED' || error.code === 'ENOENT') finish({ held: false });
      else finish({ held: true });
    });
  });

const pidOf = (text: string): { pid?: number } => {
  try {
    const pid = (JSON.parse(text) as { pid?: unknown }).pid;
    return typeof pid === 'number' ? { pid } : {};
  } catch {
    return {};
  }
};

const removeStale = (dir: string): void => {
  const path = join(dir, LOCK_FILE);
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (!isSocket) throw new Error(`could not lock the data dir ${dir}: ${path} is in the way and is not a socket; remove it`);
  unlinkSync(path);
};

// libuv unlinks a listening socket's file when it is closed, by the name it was bound with: close it
// from the data dir too, or a file of that name in the working directory would go instead.
const release = (dir: string, server: net.Server): Promise<void> => new Promise((done) => inDir(dir, () => server.close(() => done())));
