import t from 'tap';
import { HttpServer } from '../src/api/http-server.js';
import { Router } from '../src/api/router.js';
import type { Logger } from '../src/domain/logger.js';
import { progress } from '../src/domain/progress.js';
import { machineWithVersion } from './helpers/setup.js';
import { call } from './helpers/http.js';
import { onlyEmbedded, removeDir, startNode, tempDataDir } from './helpers/node-process.js';
import { logState } from './helpers/wal.js';

/** --log-format json, x-request-id on every answer and in a request's log lines, progress lines of long start-up work. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const counterMachine = `import { createMachine, assign } from "xstate";
export const allowRead = () => true;
export const allowWrite = () => true;
export default createMachine({ id: "counter", predictableActionArguments: true, initial: "on",
  context: { n: 0 }, states: { on: { on: { INC: { actions: assign({ n: (c) => c.n + 1 }) } } } } });`;

t.test('x-request-id: echoed when sane, made up otherwise, on every answer', onlyEmbedded('headers of one node'), async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());
  const given = await call(node.url, 'GET', '/health', { headers: { 'x-request-id': 'trace-42.a_b:c' } });
  t.equal(given.headers['x-request-id'], 'trace-42.a_b:c', 'a sane id comes back');
  const made = await call(node.url, 'GET', '/health');
  t.match(made.headers['x-request-id'], UUID, 'none given: one is made');
  t.not((await call(node.url, 'GET', '/health')).headers['x-request-id'], made.headers['x-request-id'], 'a new one each time');
  for (const insane of ['has space', 'x'.repeat(129), 'semi;colon', 'quo"te', '<b>']) {
    const res = await call(node.url, 'GET', '/health', { headers: { 'x-request-id': insane } });
    t.match(res.headers['x-request-id'], UUID, `${JSON.stringify(insane.slice(0, 12))}: replaced`);
  }
  const notFound = await call(node.url, 'GET', '/nowhere', { headers: { 'x-request-id': 'r-404' } });
  t.equal(notFound.status, 404);
  t.equal(notFound.headers['x-request-id'], 'r-404', 'on a 404');
  const refused = await call(node.url, 'GET', '/orgs', { headers: { 'x-request-id': 'r-403' } });
  t.equal(refused.status, 403);
  t.equal(refused.headers['x-request-id'], 'r-403', 'on a 403');
  const wrongMethod = await call(node.url, 'PATCH', '/health', { headers: { 'x-request-id': 'r-405' } });
  t.equal(wrongMethod.status, 405);
  t.equal(wrongMethod.headers['x-request-id'], 'r-405', 'on a 405');
  const preflight = await call(node.url, 'OPTIONS', '/machines', { headers: { 'x-request-id': 'r-options' } });
  t.equal(preflight.headers['x-request-id'], 'r-options', 'on a preflight');
  t.match(preflight.headers['access-control-allow-headers'], /x-request-id/, 'browsers may send it');
  t.match(made.headers['access-control-expose-headers'], /x-request-id/, 'and read it');
});

t.test("a request's error log line names its request id, org, machine and instance", async (t) => {
  const lines: Array<{ level: string; message: string; fields?: Record<string, unknown> }> = [];
  const logger: Logger = {
    info: (message, fields) => lines.push({ level: 'info', message, ...(fields ? { fields } : {}) }),
    warn: (message, fields) => lines.push({ level: 'warn', message, ...(fields ? { fields } : {}) }),
    error: (message, fields) => lines.push({ level: 'error', message, ...(fields ? { fields } : {}) }),
  };
  const router = new Router().add('POST', '/machines/:machine/i/:instance/events', () => {
    throw new Error('a bug');
  });
  const server = await HttpServer.start({ router, host: '127.0.0.1', port: 0, maxBodyBytes: 1024, logger });
  t.teardown(() => server.drain());
  const url = `http://127.0.0.1:${server.port}`;
  const res = await call(url, 'POST', '/machines/m1/i/i1/events', {
    headers: { 'x-request-id': 'req-7', 'x-statebacked-org-id': 'org_1' },
  });
  t.equal(res.status, 500);
  t.same(res.body, { error: 'internal error', code: 'internal' });
  t.equal(res.headers['x-request-id'], 'req-7');
  const line = lines.find((l) => l.level === 'error');
  t.match(line?.fields, {
    requestId: 'req-7',
    org: 'org_1',
    machine: 'm1',
    instance: 'i1',
    route: '/machines/:machine/i/:instance/events',
    error: /a bug/,
  });
  const generated = await call(url, 'POST', '/machines/m1/i/i1/events');
  t.equal(lines.at(-1)?.fields?.requestId, generated.headers['x-request-id'], 'a made-up id is the one logged');
});

t.test(
  '--log-format json: every line on stdout and stderr is one object with time, level and message',
  onlyEmbedded('one node'),
  async (t) => {
    const node = await startNode({ args: ['--log-format', 'json'] });
    t.equal((await call(node.url, 'GET', '/health')).status, 200);
    t.equal(await node.stop(), 0);
    const lines = node
      .output()
      .split('\n')
      .filter((line) => line !== '');
    t.ok(lines.length >= 3, `${lines.length} lines`);
    for (const line of lines) {
      const entry = JSON.parse(line) as Record<string, unknown>;
      t.match(entry, { time: /^\d{4}-\d\d-\d\dT/, level: /^(info|warn|error)$/, message: String }, line.slice(0, 80));
    }
    t.ok(
      lines.some((line) => /"message":"listening on http/.test(line)),
      'where it listens',
    );
    t.ok(
      lines.some((line) => /"message":"stopped cleanly"/.test(line)),
      'its stop',
    );
  },
);

t.test('--log-format: only text or json', async (t) => {
  const node = startNode({ args: ['--log-format', 'xml'], startTimeoutMs: 10_000 });
  await t.rejects(node, /--log-format must be text or json, not "xml"/);
  const failing = startNode({ args: ['--log-format', 'json', '--page-size', '0'], startTimeoutMs: 10_000 });
  await t.rejects(
    failing,
    /\{"time":"[^"]+","level":"error","message":"--page-size must be an integer from 1 to 1000, not \\"0\\""\}/,
    'a failed start says why as a JSON line too',
  );
});

t.test('a long write-ahead log replay says how far it is', onlyEmbedded('the write-ahead log'), async (t) => {
  const dataDir = tempDataDir();
  t.teardown(() => removeDir(dataDir));
  const adminKey = 'progress-admin';
  // LMDB gets nothing of the commits: after a kill -9 the log holds them all, replayed at the next start.
  const first = await startNode({
    dataDir,
    args: ['--admin-key', adminKey],
    generatedAdminKey: true,
    env: { STATEHOLD_WAL_APPLY_DELAY_MS: '600000' },
  });
  await machineWithVersion({ ...first, adminKey }, 'counter', counterMachine);
  const writers = 8;
  for (let w = 0; w < writers; w++) await call(first.url, 'POST', '/machines/counter', { token: adminKey, body: { slug: `w${w}` } });
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let n = 0; n < 40; n++) {
        const res = await call(first.url, 'POST', `/machines/counter/i/w${w}/events`, { token: adminKey, body: { event: 'INC' } });
        if (res.status !== 200) throw new Error(`event answered ${res.status}: ${res.text}`);
      }
    }),
  );
  t.equal(await first.stop('SIGKILL'), 'SIGKILL');
  const { onlyInLog } = await logState(dataDir);
  t.ok(onlyInLog.length >= 50, `${onlyInLog.length} frames only in the log`);

  // (the interval shortened from 2 s, so that this small replay counts as long)
  const second = await startNode({
    dataDir,
    args: ['--admin-key', adminKey, '--log-format', 'json'],
    generatedAdminKey: true,
    env: { STATEHOLD_PROGRESS_EVERY_MS: '1' },
  });
  t.teardown(() => second.stop());
  const entries = second
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { message: string });
  const steps = entries.filter((entry) =>
    /^applying the write-ahead log to LMDB: \d+ of \d+ frames \(\d+ %\), \d+\/s, /.test(entry.message),
  );
  t.ok(steps.length > 0, `${steps.length} progress lines, e.g. ${steps[0]?.message}`);
  t.match(steps.at(-1)?.message, new RegExp(`of ${onlyInLog.length} frames`), 'out of the frames there were');
  t.ok(
    entries.some((entry) => entry.message.startsWith(`applying the write-ahead log to LMDB: done, ${onlyInLog.length} frames in `)),
    'and when it is done',
  );
  const admin = await call(second.url, 'GET', '/machines/counter/i/w0/admin', { token: adminKey });
  t.equal(admin.body?.context?.n, 40, 'the replayed instance has all its events');
});

t.test('progress: nothing before the interval, then done of total, rate and time left', (t) => {
  let now = 0;
  const said: string[] = [];
  const work = progress(
    'copying',
    'items',
    2_000,
    (line) => said.push(line),
    () => now,
  );
  now = 1_000;
  work.step(10, 100);
  t.same(said, [], 'a short piece of work says nothing');
  now = 2_000;
  work.step(20, 100, 'note');
  t.same(said, ['copying: 20 of 100 items (20 %), 10/s, about 8 s left; note']);
  now = 3_000;
  work.step(30, 100);
  t.equal(said.length, 1, 'then once per interval');
  now = 4_500;
  work.end(100);
  t.equal(said.at(-1), 'copying: done, 100 items in 4.5 s');
  const quiet: string[] = [];
  progress(
    'quick',
    'items',
    2_000,
    (line) => quiet.push(line),
    () => 0,
  ).end(5);
  t.same(quiet, [], 'a short piece of work does not say it ended either');
  t.end();
});
