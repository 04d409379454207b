/**
 * Code not yet trusted runs in a second sandbox worker, the quarantine worker: uploaded bundles being
 * validated, and versions whose request crashed a worker twice in a row. Crashes of that code then
 * spare the main worker, where every other org's isolates and live actors are.
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { type NodeProcess, startNode } from './helpers/node-process.js';
import { workerPid } from './helpers/sandbox-workers.js';
import { machineWithVersion } from './helpers/setup.js';
import { crashOnBoomMachine } from './fixtures/instance-machines.js';

const history = async (node: NodeProcess, machine: string, name: string): Promise<string[]> => {
  const answer = await call(node.url, 'GET', `/machines/${machine}/i/${name}/events`, { token: node.adminKey });
  return (answer.body as { transitions: { event: { type: string } }[] }).transitions.map((tr) => tr.event.type);
};

t.test('a version that crashes its worker twice in a row runs in the quarantine worker; later crashes spare the main worker', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop('SIGKILL'));
  const token = node.adminKey;
  const bad = (await machineWithVersion(node, 'bad', crashOnBoomMachine)).machineVersionId;
  await machineWithVersion(node, 'good', crashOnBoomMachine);
  t.equal((await call(node.url, 'POST', '/machines/bad', { token, body: { slug: 'x' } })).status, 200);
  for (let i = 0; i < 4; i++) t.equal((await call(node.url, 'POST', '/machines/good', { token, body: { slug: `i${i}` } })).status, 200);

  const first = await call(node.url, 'POST', '/machines/bad/i/x/events', { token, body: { event: 'BOOM' } });
  t.equal(first.status, 400, 'the crashing event fails');
  t.match(node.output(), `machine version ${bad} crashed its sandbox worker twice in a row: it runs in the quarantine worker from now on`);

  t.equal((await call(node.url, 'POST', '/machines/good/i/i0/events', { token, body: { event: 'ADD' } })).status, 200);
  const main = workerPid(node, 'main');
  t.ok(main, 'a main worker runs');
  const outcomes = await Promise.all([
    call(node.url, 'POST', '/machines/bad/i/x/events', { token, body: { event: 'BOOM' } }),
    ...[0, 1, 2, 3].map((i) => call(node.url, 'POST', `/machines/good/i/i${i}/events`, { token, body: { event: 'ADD' } })),
  ]);
  t.equal(outcomes[0]?.status, 400, 'the quarantined version still fails its crashing event');
  t.same(outcomes.slice(1).map((o) => o.status), [200, 200, 200, 200], 'the others are applied');
  t.equal(workerPid(node, 'main'), main, 'the main worker did not die this time');
  t.match(node.output(), 'the quarantine sandbox worker died', 'the quarantine worker did');

  t.equal((await call(node.url, 'POST', '/machines/bad/i/x/events', { token, body: { event: 'ADD' } })).status, 200, 'the quarantined version still serves its other events');
  t.same(await history(node, 'bad', 'x'), ['xstate.init', 'ADD'], 'and nothing of its crashes was applied');
  t.same(await history(node, 'good', 'i0'), ['xstate.init', 'ADD', 'ADD']);
  t.same(await history(node, 'good', 'i3'), ['xstate.init', 'ADD']);
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
