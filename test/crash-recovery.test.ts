import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { effectsMachine } from './fixtures/instance-machines.js';
import { bundleLikeSmply } from './helpers/bundle.js';
import { call } from './helpers/http.js';
import { removeDir, startNode, tempDataDir } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { eventType } from './helpers/transitions.js';
import { logState } from './helpers/wal.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/**
 * kill -9 at an arbitrary moment loses no acknowledged event: every event answered 200 is in the
 * instance's history after a restart, in the order it was acknowledged, and the instance goes on.
 * With the write-ahead log the machine is bundled with xstate inside, as smply uploads it (its
 * instances are restored by its own xstate copy after the restart).
 */
// Each test has a node and a data dir of its own: two run side by side.
t.jobs = 2;

for (const commitLog of ['wal', 'lmdb'])
  t.test(`no acknowledged event is lost across kill -9 (--commit-log ${commitLog})`, async (t) => {
    const dataDir = tempDataDir();
    t.teardown(() => removeDir(dataDir));
    const adminKey = 'crash-admin';
    const first = await startNode({ dataDir, args: ['--admin-key', adminKey, '--commit-log', commitLog], generatedAdminKey: true });
    await machineWithVersion(
      { ...first, adminKey },
      'crashy',
      commitLog === 'wal' ? await bundleLikeSmply(effectsMachine) : effectsMachine,
    );
    const writers = 8;
    for (let w = 0; w < writers; w++) await call(first.url, 'POST', '/machines/crashy', { token: adminKey, body: { slug: `w${w}` } });

    const acked: string[][] = Array.from({ length: writers }, () => []);
    const inFlight: Array<string | undefined> = Array.from({ length: writers }, () => undefined);
    let killed = false;
    const deadline = Date.now() + 15_000;
    const writer = async (w: number) => {
      for (let n = 0; !killed && n < 100_000 && Date.now() < deadline; n++) {
        const note = `w${w}-${n}`;
        inFlight[w] = note;
        try {
          const res = await call(first.url, 'POST', `/machines/crashy/i/w${w}/events`, {
            token: adminKey,
            body: { event: { type: 'NOTE', note } },
          });
          if (res.status === 200) acked[w]?.push(note);
          else if (!killed) throw new Error(`unexpected ${res.status}: ${res.text}`);
        } catch (error) {
          if (!killed) throw error;
          return;
        }
      }
    };
    const running = Array.from({ length: writers }, (_, w) => writer(w));
    // Kill once a fair amount of work was acknowledged, at a moment the writers do not choose.
    while (acked.reduce((n, a) => n + a.length, 0) < 400 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 50)));
    killed = true;
    t.equal(await first.stop('SIGKILL'), 'SIGKILL');
    await Promise.allSettled(running);
    const total = acked.reduce((n, a) => n + a.length, 0);
    t.ok(total >= 400, `${total} events were acknowledged before the kill`);

    const second = await startNode({ dataDir, args: ['--admin-key', adminKey, '--commit-log', commitLog], generatedAdminKey: true });
    t.teardown(() => second.stop());
    const client = new StateBackedClient(adminKey, { apiHost: second.url });
    for (let w = 0; w < writers; w++) {
      const notes: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.machineInstances.listTransitions('crashy', `w${w}`, cursor ? { cursor } : undefined);
        notes.push(...page.transitions.slice(notes.length === 0 ? 1 : 0).map((tr) => (tr.event as { type: string; note: string }).note));
        cursor = page.cursor;
      } while (cursor);
      const expected = acked[w] as string[];
      // The one request in flight at the kill may have committed without its answer arriving.
      const extra = notes.length === expected.length + 1 ? notes.at(-1) : undefined;
      t.same(
        extra === undefined ? notes : notes.slice(0, -1),
        expected,
        `w${w}: the history holds exactly the acknowledged events, in order`,
      );
      if (extra !== undefined) t.equal(extra, inFlight[w], `w${w}: the only extra event is the one in flight at the kill`);
      const state = await client.machineInstances.admin.get('crashy', `w${w}`);
      t.same(state.context.log, notes, `w${w}: the committed context agrees with the history`);
      const after = await client.machineInstances.sendEvent('crashy', `w${w}`, { event: { type: 'NOTE', note: 'after-restart' } });
      t.equal(after.state, 'idle', `w${w}: the instance goes on after the restart`);
    }
  });

/**
 * Events sent one at a time are acknowledged from the write-ahead log (lmdb-instance-store.ts); here
 * LMDB is held back from taking them, so the kill finds them only in the log, and the restart must
 * apply them.
 */
t.test('events acknowledged from the write-ahead log alone survive kill -9', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const adminKey = 'crash-admin';
  const first = await startNode({ dataDir, args: ['--admin-key', adminKey], env: { STATEHOLD_WAL_APPLY_DELAY_MS: '600000' } });
  await machineWithVersion({ ...first, adminKey }, 'lone', effectsMachine);
  await call(first.url, 'POST', '/machines/lone', { token: adminKey, body: { slug: 'solo' } });
  const acked: string[] = [];
  for (let n = 0; n < 60; n++) {
    const res = await call(first.url, 'POST', '/machines/lone/i/solo/events', {
      token: adminKey,
      body: { event: { type: 'NOTE', note: `n${n}` } },
    });
    t.equal(res.status, 200, res.text);
    acked.push(`n${n}`);
  }
  t.equal(await first.stop('SIGKILL'), 'SIGKILL');
  const { onlyInLog } = await logState(dataDir);
  t.ok(onlyInLog.length >= 60, `the acknowledged events are in the log (${onlyInLog.length} frames LMDB had not applied)`);

  const second = await startNode({ dataDir, args: ['--admin-key', adminKey] });
  t.teardown(() => second.stop());
  const client = new StateBackedClient(adminKey, { apiHost: second.url });
  const notes: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.machineInstances.listTransitions('lone', 'solo', cursor ? { cursor } : undefined);
    notes.push(...page.transitions.slice(notes.length === 0 ? 1 : 0).map((tr) => (tr.event as { type: string; note: string }).note));
    cursor = page.cursor;
  } while (cursor);
  t.same(notes, acked, 'the history holds every acknowledged event, in order');
  const state = await client.machineInstances.admin.get('lone', 'solo');
  t.same(state.context.log, acked, 'and the head agrees');
  const after = await client.machineInstances.sendEvent('lone', 'solo', { event: { type: 'NOTE', note: 'after' } });
  t.equal(after.state, 'idle', 'the instance goes on');
  t.same((await client.machineInstances.admin.get('lone', 'solo')).context.log, [...acked, 'after']);
});

/** A nap of 1.5 s, started again by every TOUCH (a commit that moves the pending delayed event). */
const NAP = `import { createMachine } from "xstate";
export default createMachine({ id: "nap", predictableActionArguments: true, initial: "waiting",
  states: { waiting: { after: { 1500: "done" }, on: { TOUCH: "waiting" } }, done: {} } });
export const allowRead = () => true;
export const allowWrite = () => true;
`;

t.test('delayed events acknowledged from the write-ahead log alone fire on time, before LMDB has them and after kill -9', async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const adminKey = 'crash-admin';
  // (a settling budget below the nap, so that the delay is left pending and stored)
  const args = ['--admin-key', adminKey, '--settle-timeout-ms', '200'];
  const first = await startNode({ dataDir, args, env: { STATEHOLD_WAL_APPLY_DELAY_MS: '600000' } });
  await machineWithVersion({ ...first, adminKey }, 'nap', NAP);
  const client = new StateBackedClient(adminKey, { apiHost: first.url });
  const firstRecordAt = async (c: StateBackedClient, name: string, index: number) =>
    Date.parse((await c.machineInstances.listTransitions('nap', name)).transitions[index]?.createdAt ?? '');

  // Its timer is only in the log: the scheduler must find it among the commits LMDB does not have yet.
  t.equal((await client.machineInstances.create('nap', { slug: 'a' })).state, 'waiting');
  const aStarted = await firstRecordAt(client, 'a', 0);
  await sleep(aStarted + 1_500 + 700 - Date.now());
  t.equal((await client.machineInstances.get('nap', 'a')).state, 'done', 'it fired while LMDB had none of its commits');
  const aFired = (await firstRecordAt(client, 'a', 1)) - (aStarted + 1_500);
  t.ok(aFired >= 0 && aFired < 500, `on time (${aFired} ms after its due time)`);

  t.equal((await client.machineInstances.create('nap', { slug: 'b' })).state, 'waiting');
  await sleep(400);
  t.equal((await client.machineInstances.sendEvent('nap', 'b', { event: 'TOUCH' })).state, 'waiting');
  const touched = await firstRecordAt(client, 'b', 1);
  t.equal(await first.stop('SIGKILL'), 'SIGKILL');
  t.ok((await logState(dataDir)).onlyInLog.length >= 4, 'the commits were in the log alone');

  const second = await startNode({ dataDir, args });
  t.teardown(() => second.stop());
  // (should the restart outlast the nap, the delay is due at once when the node is back)
  const backLate = Math.max(0, Date.now() - (touched + 1_500));
  const again = new StateBackedClient(adminKey, { apiHost: second.url });
  await sleep(touched + 1_500 - Date.now());
  // (a node just back loads the version's isolate cold for the first delivery: waited for, up to 15 s)
  let b = await again.machineInstances.listTransitions('nap', 'b');
  for (const until = Date.now() + 15_000; b.transitions.length < 3 && Date.now() < until; await sleep(100)) {
    b = await again.machineInstances.listTransitions('nap', 'b');
  }
  t.same(
    b.transitions.map((tr) => [eventType(tr), tr.state]),
    [
      ['xstate.init', 'waiting'],
      ['TOUCH', 'waiting'],
      ['xstate.after(1500)#nap.waiting', 'done'],
    ],
    'the moved delay fired once, after the restart',
  );
  const bFired = Date.parse(b.transitions[2]?.createdAt ?? '') - (touched + 1_500);
  t.ok(
    bFired >= 0,
    `not before its moved due time (${bFired} ms after it; the node was back ${backLate} ms after it), nor at the one the TOUCH replaced`,
  );
});
