/**
 * Code not yet trusted runs in a second sandbox worker, the quarantine worker: uploaded bundles being
 * validated, and versions whose request crashed a worker twice in a row. Crashes of that code then
 * spare the main worker, where every other org's isolates and live actors are.
 *
 * The tests of the crash-twice rule turn the stall watchdog off (--sandbox-stall-ms 0): with it, a
 * memory bomb holds the worker long enough to be moved aside at its first offence
 * (sandbox-neighbours.test.ts); the rule still serves crashes that come at once.
 *
 * Without the watchdog, how long a crash takes is how long V8 thrashes before it gives up at the
 * isolate's heap limit (--isolate-memory-mb plus --live-actor-memory-mb): ≈ 3.6 s at 128 MB, ≈ 7.8 s
 * at the default 256, which made this file take 140–160 s of its 180. These tests keep the live-actor
 * budget small (144 MB in all: ≈ 2.2 s).
 */
const noWatchdog = { args: ['--sandbox-stall-ms', '0', '--live-actor-memory-mb', '16'] };
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { call } from './helpers/http.js';
import { type NodeProcess, startNode } from './helpers/node-process.js';
import { workerPid } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';
import { crashOnBoomMachine } from './fixtures/instance-machines.js';

/** The node's first org and a second one, each with helpers that name it on every call. */
const twoOrgs = async (node: NodeProcess) => {
  const token = node.adminKey as string;
  const first = (await call(node.url, 'GET', '/orgs', { token })).body.orgs[0].id as string;
  const created = await call(node.url, 'POST', '/orgs', { token, body: { name: 'second', allowAnonymousAccess: false } });
  if (created.status !== 200) throw new Error(`creating an org: ${created.status} ${created.text}`);
  const second = ((await call(node.url, 'GET', '/orgs', { token })).body.orgs as { id: string }[]).find((org) => org.id !== first)?.id as string;
  const inOrg = (orgId: string) => {
    const headers = { 'x-statebacked-org-id': orgId };
    return {
      id: orgId,
      /** A machine whose current version is crashOnBoomMachine; returns the version's id. */
      upload: async (machine: string) => {
        const operator = new StateBackedClient(token, { apiHost: node.url, orgId });
        await operator.machines.create(machine);
        return (await operator.machineVersions.create(machine, { clientInfo: machine, makeCurrent: true, code: crashOnBoomMachine })).machineVersionId;
      },
      post: (path: string, body: unknown) => call(node.url, 'POST', path, { token, body, headers }),
      history: async (machine: string, name: string): Promise<string[]> => {
        const answer = await call(node.url, 'GET', `/machines/${machine}/i/${name}/events`, { token, headers });
        return (answer.body as { transitions: { event: { type: string } }[] }).transitions.map((tr) => tr.event.type);
      },
    };
  };
  return { a: inOrg(first), b: inOrg(second) };
};

t.test("a version that crashes its worker twice in a row runs in the quarantine worker; its later crashes spare the main worker and other orgs' instances", async (t) => {
  const node = await startNode(noWatchdog);
  t.teardown(() => node.stop('SIGKILL'));
  const { a, b } = await twoOrgs(node);
  const bad = await a.upload('bad');
  await b.upload('good');
  t.equal((await a.post('/machines/bad', { slug: 'x' })).status, 200);
  for (let i = 0; i < 4; i++) t.equal((await b.post('/machines/good', { slug: `i${i}` })).status, 200);

  const first = await a.post('/machines/bad/i/x/events', { event: 'BOOM' });
  t.equal(first.status, 400, 'the crashing event fails');
  t.match(node.output(), `machine version ${bad} crashed its sandbox worker twice in a row: it runs in the quarantine worker from now on`);

  t.equal((await b.post('/machines/good/i/i0/events', { event: 'ADD' })).status, 200);
  const main = workerPid(node, 'main');
  t.ok(main, 'a main worker runs');
  const outcomes = await Promise.all([
    a.post('/machines/bad/i/x/events', { event: 'BOOM' }),
    ...[0, 1, 2, 3].map((i) => b.post(`/machines/good/i/i${i}/events`, { event: 'ADD' })),
  ]);
  t.equal(outcomes[0]?.status, 400, 'the quarantined version still fails its crashing event');
  t.same(outcomes.slice(1).map((o) => o.status), [200, 200, 200, 200], 'the others are applied');
  t.equal(workerPid(node, 'main'), main, 'the main worker did not die this time');
  t.match(node.output(), 'the quarantine sandbox worker died', 'the quarantine worker did');

  t.equal((await a.post('/machines/bad/i/x/events', { event: 'ADD' })).status, 200, 'the quarantined version still serves its other events');
  t.same(await a.history('bad', 'x'), ['xstate.init', 'ADD'], 'and nothing of its crashes was applied');
  t.same(await b.history('good', 'i0'), ['xstate.init', 'ADD', 'ADD']);
  t.same(await b.history('good', 'i3'), ['xstate.init', 'ADD']);
});

t.test('uploads are validated in the quarantine worker: a bundle whose top-level code crashes it spares the main worker', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  await machineWithVersion(node, 'good', crashOnBoomMachine);
  t.equal((await call(node.url, 'POST', '/machines/good', { token, body: { slug: 'i' } })).status, 200);
  const main = workerPid(node, 'main');
  t.ok(main, 'a main worker runs');

  let refused = '';
  try {
    await machineWithVersion(node, 'crashy', `new Array(2 ** 30).fill(0);\n${crashOnBoomMachine}`);
  } catch (error) {
    refused = (error as Error).message;
  }
  t.match(refused, /crashed the sandbox/, `the upload is refused and says why: ${refused}`);
  t.equal(workerPid(node, 'main'), main, 'the main worker lives on');
  t.equal((await call(node.url, 'POST', '/machines/good/i/i/events', { token, body: { event: 'ADD' } })).status, 200);
});

t.test('the main worker boots with the node, before any request; the quarantine worker waits for its first use', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  let main: number | undefined;
  for (const until = Date.now() + 15_000; main === undefined && Date.now() < until; ) {
    main = workerPid(node, 'main');
    if (main === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.ok(main, 'a main worker runs although no request was made');
  t.equal(workerPid(node, 'quarantine'), undefined, 'no quarantine worker yet');
  await machineWithVersion(node, 'm', crashOnBoomMachine);
  t.ok(workerPid(node, 'quarantine'), 'the upload started the quarantine worker');
  t.equal((await call(node.url, 'POST', '/machines/m', { token: node.adminKey, body: { slug: 'a' } })).status, 200);
  t.equal(workerPid(node, 'main'), main, 'the first instance ran in the worker started at boot');
});

t.test("once a version is quarantined, every version of its org runs in the quarantine worker; other orgs' versions stay in the main one", async (t) => {
  const node = await startNode(noWatchdog);
  t.teardown(() => node.stop('SIGKILL'));
  const { a, b } = await twoOrgs(node);
  const bad = await a.upload('bad');
  await a.upload('sibling');
  await b.upload('elsewhere');
  for (const [org, machine] of [[a, 'bad'], [a, 'sibling'], [b, 'elsewhere']] as const) {
    t.equal((await org.post(`/machines/${machine}`, { slug: 'x' })).status, 200, `${machine}: created in the main worker`);
  }
  t.equal((await a.post('/machines/bad/i/x/events', { event: 'BOOM' })).status, 400);
  t.match(node.output(), `machine version ${bad} crashed its sandbox worker twice in a row: it runs in the quarantine worker from now on, and so does every version of org ${a.id}`);

  await a.upload('later');
  t.equal((await a.post('/machines/later', { slug: 'x' })).status, 200);
  t.equal((await b.post('/machines/elsewhere/i/x/events', { event: 'ADD' })).status, 200);
  const main = workerPid(node, 'main');
  t.ok(main, 'a main worker runs');
  for (const machine of ['sibling', 'later']) {
    t.equal((await a.post(`/machines/${machine}/i/x/events`, { event: 'BOOM' })).status, 400, `${machine}: its crashing event fails`);
    t.equal(workerPid(node, 'main'), main, `${machine}: the main worker survived: the version ran in the quarantine worker`);
    t.equal((await a.post(`/machines/${machine}/i/x/events`, { event: 'ADD' })).status, 200, `${machine}: its other events are applied`);
  }
  t.equal((await b.post('/machines/elsewhere/i/x/events', { event: 'BOOM' })).status, 400);
  t.not(workerPid(node, 'main'), main, "the other org's version still ran in the main worker, which its crash took down");
});

t.test('a main worker that dies is replaced at once, without waiting for a request', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  const waitFor = async (check: () => boolean) => {
    for (const until = Date.now() + 15_000; !check() && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 50));
    return check();
  };
  t.ok(await waitFor(() => workerPid(node, 'main') !== undefined), 'a main worker runs');
  const first = workerPid(node, 'main') as number;
  process.kill(first, 'SIGKILL');
  t.ok(await waitFor(() => (workerPid(node, 'main') ?? first) !== first), 'another one runs, and no request was made');
  t.match(node.output(), 'the sandbox worker died; a new one is starting');
});

t.test('a worker killed from outside (SIGKILL) while running a request: 503 to retry, and no version is blamed', async (t) => {
  const node = await startNode(noWatchdog);
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  const slow = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'slow', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  SLOW: { actions: assign({ n: (c) => { const end = Date.now() + 2500; while (Date.now() < end) {} return c.n + 1; } }) },
  INC: { actions: assign({ n: (c) => c.n + 1 }) },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;
  await machineWithVersion(node, 'slow', slow);
  t.equal((await call(node.url, 'POST', '/machines/slow', { token, body: { slug: 'x' } })).status, 200);
  const first = workerPid(node, 'main') as number;
  t.ok(first, 'a main worker runs');
  const sending = call(node.url, 'POST', '/machines/slow/i/x/events', { token, body: { event: 'SLOW' } });
  await new Promise((resolve) => setTimeout(resolve, 500));
  process.kill(first, 'SIGKILL');
  // The request is run once more in the next worker: kill that one too, in the middle of it.
  let second: number | undefined;
  for (const until = Date.now() + 15_000; (second === undefined || second === first) && Date.now() < until; await new Promise((r) => setTimeout(r, 25))) {
    second = workerPid(node, 'main');
  }
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  process.kill(second as number, 'SIGKILL');
  const answer = await sending;
  t.equal(answer.status, 503, 'the request is answered 503');
  t.equal(answer.body?.code, 'unavailable');
  t.match(answer.body?.error, /killed \(SIGKILL\) from outside the node .* nothing was applied: retry/);
  t.notMatch(node.output(), 'crashed its sandbox worker twice in a row', 'the version was not quarantined');
  t.equal((await call(node.url, 'POST', '/machines/slow/i/x/events', { token, body: { event: 'INC' } })).status, 200, 'and goes on');
  const history = await call(node.url, 'GET', '/machines/slow/i/x/events', { token });
  t.same(history.body.transitions.map((tr: { event: { type: string } }) => tr.event.type), ['xstate.init', 'INC'], 'the killed request left nothing');
});
