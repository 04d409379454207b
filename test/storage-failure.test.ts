/**
 * A full disk (here: a file-size limit, EFBIG where a full disk gives ENOSPC). lmdb-js rejects the
 * promise of every write of a commit LMDB failed, also of writes the stores queued without waiting, and
 * one such unhandled rejection took the node down (with the write-ahead log); without the log, commits
 * kept failing one after another until lmdb-js corrupted its heap (`malloc(): invalid next size`). Now
 * the node stays up: writes get 503, reads answer, /health says 503, and a restart (with room again)
 * has every write that was acknowledged.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { call } from './helpers/http.js';
import { removeDir, startNodeProcess, tempDataDir } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

const machine = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'fill', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  NOTE: { actions: assign({ n: (c) => c.n + 1 }) },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

for (const commitLog of ['wal', 'lmdb']) {
  t.test(
    `--commit-log ${commitLog}: a failed LMDB commit refuses writes with 503, the node stays up, nothing acknowledged is lost`,
    async (t) => {
      const dataDir = tempDataDir();
      t.teardown(() => removeDir(dataDir));
      const args = ['--commit-log', commitLog];
      let node = await startNodeProcess({ dataDir, args, fileSizeLimitMib: 40 });
      t.teardown(() => node.stop('SIGKILL'));
      const token = node.adminKey;
      await machineWithVersion(node, 'fill', machine);
      t.equal((await call(node.url, 'POST', '/machines/fill', { token, body: { slug: 'i' } })).status, 200);
      const pad = 'x'.repeat(100_000);
      const acknowledged: number[] = [];
      let refused: { status: number; body: unknown } | undefined;
      for (let k = 0; k < 2_000 && refused === undefined; k++) {
        const res = await call(node.url, 'POST', '/machines/fill/i/i/events', { token, body: { event: { type: 'NOTE', k, pad } } });
        if (res.status === 200) acknowledged.push(k);
        else refused = res;
      }
      t.match(
        refused,
        { status: 503, body: { code: 'unavailable', error: /storage failed/ } },
        `refused once LMDB failed (${acknowledged.length} acknowledged before)`,
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      t.equal(node.child.exitCode, null, 'the node is still running');
      t.equal((await call(node.url, 'GET', '/health')).status, 503, '/health says it cannot serve');
      t.equal((await call(node.url, 'GET', '/machines/fill/i/i', { token })).status, 200, 'reads answer');
      const again = await call(node.url, 'POST', '/machines/fill/i/i/events', { token, body: { event: { type: 'NOTE', k: -1 } } });
      t.equal(again.status, 503, 'a small write too is refused');
      t.match(
        await call(node.url, 'POST', '/machines', { token, body: { slug: 'later' } }),
        { status: 503, body: { code: 'unavailable' } },
        "and the catalog's writes (a machine)",
      );
      t.notMatch(node.output(), /malloc\(\)|Unhandled|unhandled/, 'no crash, no unhandled rejection');

      await node.stop('SIGKILL');
      node = await startNodeProcess({ dataDir, args });
      const seen: number[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const res = await call(node.url, 'GET', `/machines/fill/i/i/events${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`, {
          token: node.adminKey,
        });
        t.equal(res.status, 200);
        const body = res.body as { transitions: Array<{ event: { k?: number } }>; cursor?: string };
        for (const item of body.transitions) if (item.event.k !== undefined) seen.push(item.event.k);
        cursor = body.cursor;
        if (!cursor) break;
      }
      t.same(
        seen.filter((k) => k >= 0),
        acknowledged,
        'after a restart with room, every acknowledged event is in the history, once, in order',
      );
    },
  );
}

t.test('a disk without room for the write-ahead log: the start fails saying so, and leaves no partial segment', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  await t.rejects(
    startNodeProcess({ dataDir, fileSizeLimitMib: 20 }),
    /node exited \(1\) before listening:[^]*no room for a write-ahead log segment of 32 MiB in .*wal \(EFBIG\): the log needs two/,
  );
  t.same(readdirSync(join(dataDir, 'wal')), [], 'the segment it could not fill is gone');
});

t.test("the data dir's files removed under a running node: writes are refused, not acknowledged into files no path names", async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const node = await startNodeProcess({ dataDir });
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  await machineWithVersion(node, 'fill', machine);
  t.equal((await call(node.url, 'POST', '/machines/fill', { token, body: { slug: 'i' } })).status, 200);
  for (const entry of readdirSync(dataDir)) rmSync(join(dataDir, entry), { recursive: true, force: true });
  let status = 200;
  for (const until = Date.now() + 10_000; status === 200 && Date.now() < until;) {
    status = (await call(node.url, 'POST', '/machines/fill/i/i/events', { token, body: { event: { type: 'NOTE' } } })).status;
    if (status === 200) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.equal(status, 503, 'within a few seconds, events get 503');
  t.equal((await call(node.url, 'GET', '/health')).status, 503, '/health too');
  t.equal((await call(node.url, 'POST', '/machines', { token, body: { slug: 'later' } })).status, 503, 'a machine too');
  t.match(node.output(), /statehold\.lmdb was removed under the node: writes are refused/, 'logged');
});
