import { signToken } from '@statebacked/token';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { ALLOW_ALL, TOGGLE } from './fixtures/machines.js';
import { machineWithVersion } from './helpers/setup.js';

/** GET /stats: what the node holds in memory, for its operator (and make bench). */
const node = await startNode({ args: ['--max-live-actors', '30'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

/** A send without a delay: its instances keep an interpreter (pure steps, isolate/harness-pure-steps.js). */
const SENDER = `import { createMachine, send } from "xstate";
export default createMachine({ id: "sender", initial: "a", states: { a: { on: { GO: { actions: send("PING") }, PING: "b" } }, b: {} } });
${ALLOW_ALL}`;

type Stats = {
  node: { rssBytes: number; heapUsedBytes: number };
  actors: { held: number; live: number; maxHeld: number };
  sandboxWorkers: {
    main: { rssBytes: number; isolates: { versionId: string; heapUsedBytes: number; resting: number; interpreters: number }[] } | null;
    quarantine: unknown;
  };
};
const stats = async () => {
  const answer = await call(node.url, 'GET', '/stats', { token: admin });
  t.equal(answer.status, 200);
  return answer.body as Stats;
};

t.test("the operator sees the node's memory, its actors, and each isolate's heap and live actors", async (t) => {
  const before = await stats();
  t.ok(before.node.rssBytes > 10 * 1024 * 1024 && before.node.heapUsedBytes > 0, "the node's own memory");
  t.same(before.actors, { held: 0, live: 0, maxHeld: 30 });

  const { operator, machineVersionId: toggle } = await machineWithVersion(node, 'toggle', TOGGLE);
  const { machineVersionId: sender } = await machineWithVersion(node, 'sender', SENDER);
  for (let i = 0; i < 20; i++) await operator.machineInstances.create('toggle', { slug: `t${i}` });
  for (let i = 0; i < 20; i++) await operator.machineInstances.sendEvent('toggle', `t${i}`, { event: 'TOGGLE' });
  for (let i = 0; i < 5; i++) await operator.machineInstances.create('sender', { slug: `d${i}` });

  const after = await stats();
  t.same(after.actors, { held: 25, live: 25, maxHeld: 30 });
  const isolates = after.sandboxWorkers.main?.isolates ?? [];
  const of = (versionId: string) => isolates.find((i) => i.versionId === versionId);
  t.match(of(toggle), { resting: 20, interpreters: 0 }, 'the toggles rest without interpreters');
  t.match(of(sender), { resting: 0, interpreters: 5 }, 'a machine with a send keeps interpreters');
  t.ok((of(toggle)?.heapUsedBytes ?? 0) > 1024 * 1024, "each isolate's heap");
  t.ok((after.sandboxWorkers.main?.rssBytes ?? 0) > 10 * 1024 * 1024, "the worker's memory");

  // Beyond --max-live-actors, the least recently used are let go: held and live stay within it.
  for (let i = 20; i < 40; i++) await operator.machineInstances.create('toggle', { slug: `t${i}` });
  const bounded = await stats();
  t.ok(bounded.actors.held <= 30 && bounded.actors.live <= 30, `at most 30 held: ${JSON.stringify(bounded.actors)}`);
  const isolate = bounded.sandboxWorkers.main?.isolates.find((i) => i.versionId === toggle);
  t.ok(
    isolate !== undefined && isolate.resting + isolate.interpreters <= 30,
    `the isolate let the evicted go too: ${JSON.stringify(isolate)}`,
  );
  t.equal(isolate?.interpreters, 0);
});

t.test('only the operator may read them', async (t) => {
  const org = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs[0].id as string;
  const created = await call(node.url, 'POST', '/keys', {
    token: admin,
    body: { name: 'reader', scopes: ['machines.read', 'org.read'] },
    headers: { 'x-statebacked-org-id': org },
  });
  const key = created.body as { id: string; key: string };
  const token = await signToken({ stateBackedKeyId: key.id, stateBackedSecretKey: key.key }, { sub: 'u1' }, { expires: { in: '1h' } });
  const refused = await call(node.url, 'GET', '/stats', { token });
  t.equal(refused.status, 403);
  t.equal(refused.body.code, 'missing-user');
  const anonymous = await call(node.url, 'GET', '/stats');
  t.same([anonymous.status, anonymous.body.code], [403, 'unauthorized'], 'no credential at all (403: the client maps only 403)');
});
