/**
 * Code not yet trusted runs apart from the main sandbox worker: uploaded bundles are validated in the
 * validation worker, and versions whose request crashed a worker twice in a row run in the quarantine
 * worker. Crashes of that code then spare the main worker, where every other org's isolates and live
 * actors are.
 *
 * The tests of the crash-twice rule turn the stall watchdog off (--sandbox-stall-ms 0): with it, a
 * memory bomb holds the worker long enough to be moved aside at its first offence
 * (sandbox-neighbours.test.ts); the rule still serves crashes that come at once.
 *
 * Without the watchdog, how long a crash takes is how long V8 thrashes before it gives up at the
 * isolate's heap limit (--isolate-memory-mb plus --live-actor-memory-mb): ≈ 3.6 s at 128 MB, ≈ 7.8 s
 * at the default 256, which made this file take 140–160 s of its 180. These tests use the smallest
 * heap, 16 + 1 MB (≈ 0.3–1.5 s; smallHeapArgs says which sizes thrash without end), and one node,
 * with two orgs of their own for each test.
 */
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { call } from './helpers/http.js';
import { type NodeProcess, startNode } from './helpers/node-process.js';
import { smallHeapArgs, workerPid } from './helpers/sandbox-workers.js';
import { crashOnBoomMachine } from './fixtures/instance-machines.js';

const node = await startNode({ args: ['--sandbox-stall-ms', '0', ...smallHeapArgs] });
t.teardown(() => node.stop('SIGKILL'));

/** Two new orgs for a test, each with helpers that name it on every call. */
const twoOrgs = async (node: NodeProcess) => {
  const token = node.adminKey as string;
  const newOrg = async (name: string) => {
    const created = await call(node.url, 'POST', '/orgs', { token, body: { name, allowAnonymousAccess: false } });
    if (created.status !== 200) throw new Error(`creating an org: ${created.status} ${created.text}`);
    return created.body.id as string;
  };
  const first = await newOrg('first');
  const second = await newOrg('second');
  const inOrg = (orgId: string) => {
    const headers = { 'x-statebacked-org-id': orgId };
    return {
      id: orgId,
      /** A machine whose current version is crashOnBoomMachine; returns the version's id. */
      upload: async (machine: string) => {
        const operator = new StateBackedClient(token, { apiHost: node.url, orgId });
        await operator.machines.create(machine);
        return (await operator.machineVersions.create(machine, { clientInfo: machine, makeCurrent: true, code: crashOnBoomMachine }))
          .machineVersionId;
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

t.test(
  "a version that crashes its worker twice in a row runs in the quarantine worker; its later crashes spare the main worker and other orgs' instances",
  async (t) => {
    const { a, b } = await twoOrgs(node);
    const bad = await a.upload('bad');
    await b.upload('good');
    t.equal((await a.post('/machines/bad', { slug: 'x' })).status, 200);
    for (let i = 0; i < 4; i++) t.equal((await b.post('/machines/good', { slug: `i${i}` })).status, 200);

    const first = await a.post('/machines/bad/i/x/events', { event: 'BOOM' });
    t.equal(first.status, 400, 'the crashing event fails');
    t.match(
      node.output(),
      `machine version ${bad} crashed its sandbox worker twice in a row: it runs in the quarantine worker from now on`,
    );

    t.equal((await b.post('/machines/good/i/i0/events', { event: 'ADD' })).status, 200);
    const main = workerPid(node, 'main');
    t.ok(main, 'a main worker runs');
    const outcomes = await Promise.all([
      a.post('/machines/bad/i/x/events', { event: 'BOOM' }),
      ...[0, 1, 2, 3].map((i) => b.post(`/machines/good/i/i${i}/events`, { event: 'ADD' })),
    ]);
    t.equal(outcomes[0]?.status, 400, 'the quarantined version still fails its crashing event');
    t.same(
      outcomes.slice(1).map((o) => o.status),
      [200, 200, 200, 200],
      'the others are applied',
    );
    t.equal(workerPid(node, 'main'), main, 'the main worker did not die this time');
    t.match(node.output(), 'the quarantine sandbox worker died', 'the quarantine worker did');

    t.equal(
      (await a.post('/machines/bad/i/x/events', { event: 'ADD' })).status,
      200,
      'the quarantined version still serves its other events',
    );
    t.same(await a.history('bad', 'x'), ['xstate.init', 'ADD'], 'and nothing of its crashes was applied');
    t.same(await b.history('good', 'i0'), ['xstate.init', 'ADD', 'ADD']);
    t.same(await b.history('good', 'i3'), ['xstate.init', 'ADD']);
  },
);

t.test(
  "once a version is quarantined, every version of its org runs in the quarantine worker; other orgs' versions stay in the main one",
  async (t) => {
    const { a, b } = await twoOrgs(node);
    const bad = await a.upload('bad');
    await a.upload('sibling');
    await b.upload('elsewhere');
    for (const [org, machine] of [
      [a, 'bad'],
      [a, 'sibling'],
      [b, 'elsewhere'],
    ] as const) {
      t.equal((await org.post(`/machines/${machine}`, { slug: 'x' })).status, 200, `${machine}: created in the main worker`);
    }
    t.equal((await a.post('/machines/bad/i/x/events', { event: 'BOOM' })).status, 400);
    t.match(
      node.output(),
      `machine version ${bad} crashed its sandbox worker twice in a row: it runs in the quarantine worker from now on, and so does every version of org ${a.id}`,
    );

    await a.upload('later');
    t.equal((await a.post('/machines/later', { slug: 'x' })).status, 200);
    t.equal((await b.post('/machines/elsewhere/i/x/events', { event: 'ADD' })).status, 200);
    const main = workerPid(node, 'main');
    t.ok(main, 'a main worker runs');
    for (const machine of ['sibling', 'later']) {
      t.equal((await a.post(`/machines/${machine}/i/x/events`, { event: 'BOOM' })).status, 400, `${machine}: its crashing event fails`);
      t.equal(workerPid(node, 'main'), main, `${machine}: the main worker survived: the version ran in the quarantine worker`);
      const added = await a.post(`/machines/${machine}/i/x/events`, { event: 'ADD' });
      t.equal(added.status, 200, `${machine}: its other events are applied (${added.text})`);
    }
    t.equal((await b.post('/machines/elsewhere/i/x/events', { event: 'BOOM' })).status, 400);
    t.not(workerPid(node, 'main'), main, "the other org's version still ran in the main worker, which its crash took down");
  },
);
