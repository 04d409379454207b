/**
 * Deeply nested JSON. Parts of the node walk values recursively (V8's serializer on the sandbox worker
 * channel, msgpackr when a commit is encoded) and overflow their stack past ≈ 1,000 levels, which a
 * 10 KB body reaches. Found by an adversarial sweep: an event nested 5,000 deep stopped the node, 2,000
 * deep crashed the sandbox worker (and got the machine's org quarantined), 1,500 deep answered 500
 * after committing the new head without its history record. Input is now limited to 100 levels,
 * state that machine code produces to 200, and a commit that cannot be encoded changes nothing.
 * Also here: JSON keys named __proto__, which the same sweep used to give a context a prototype its
 * authorizer never saw.
 */
import { createHmac } from 'node:crypto';
import t from 'tap';
import { VersionIsolate } from '../src/sandbox/index.js';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { craftJwt, inOneHour, STATEBACKED_AUD } from './helpers/tokens.js';
import { ALLOW_ALL } from './fixtures/security/machines.js';

const nester = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'nest', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  INC: { actions: assign({ n: (c) => c.n + 1 }) },
  NEST: { actions: assign({ deep: (c, e) => { let v = {}; for (let i = 0; i < e.depth; i++) v = { a: v }; return v; } }) },
} } } });
${ALLOW_ALL}`;

/** The JSON text `{"a":{"a":…1…}}`, `levels` objects deep (built as text: JSON.stringify would overflow here too). */
const nested = (levels: number): string => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);

/** One node; each test has machines of its own, and reads only what the node logged while it ran. */
const node = await startNode();
t.teardown(() => node.stop('SIGKILL'));

t.test('deeply nested JSON is refused with a 4xx wherever it comes in, and nothing is applied', async (t) => {
  const token = node.adminKey;
  const outputBefore = node.output().length;
  await machineWithVersion(node, 'nest', nester);
  t.equal((await call(node.url, 'POST', '/machines/nest', { token, body: { slug: 'i' } })).status, 200);
  const history = async () =>
    (
      (await call(node.url, 'GET', '/machines/nest/i/i/events', { token })).body as { transitions: { event: { type: string } }[] }
    ).transitions.map((tr) => tr.event.type);

  for (const levels of [99, 1_500, 2_000, 5_000]) {
    const res = await call(node.url, 'POST', '/machines/nest/i/i/events', {
      token,
      rawBody: `{"event":{"type":"INC","x":${nested(levels)}}}`,
    });
    t.equal(res.status, 400, `an event body ${levels + 2} levels deep: 400`);
    t.equal(res.body?.code, 'invalid-parameter');
    t.match(res.body?.error, 'more than 100 levels deep');
  }
  t.equal(
    (await call(node.url, 'POST', '/machines/nest/i/i/events', { token, rawBody: `{"event":{"type":"INC","x":${nested(98)}}}` })).status,
    200,
    'a body exactly 100 levels deep is taken',
  );
  t.same(await history(), ['xstate.init', 'INC'], 'only that event was applied');

  const create = await call(node.url, 'POST', '/machines/nest', { token, rawBody: `{"slug":"deep","context":{"x":${nested(5_000)}}}` });
  t.equal(create.status, 400, 'a create with a context 5,000 levels deep: 400');
  t.equal((await call(node.url, 'GET', '/machines/nest/i/deep', { token })).status, 404, 'and no instance');

  const act = await call(node.url, 'GET', '/machines/nest/i/i', { token, headers: { 'x-statebacked-act': nested(5_000) } });
  t.equal(act.status, 400, 'x-statebacked-act 5,000 levels deep: 400');
  t.equal(act.body?.code, 'invalid-parameter');

  const key = (await call(node.url, 'POST', '/keys', { token, body: { name: 'k', use: 'production' } })).body as {
    id: string;
    key: string;
  };
  const claims = { aud: STATEBACKED_AUD, exp: inOneHour() };
  const shallow = craftJwt({ alg: 'HS256', kid: key.id }, { ...claims, act: { sub: 'u', x: JSON.parse(nested(90)) } }, key.key);
  t.equal((await call(node.url, 'GET', '/machines/nest/i/i', { token: shallow })).status, 200, 'a token whose claims nest 90 deep is fine');
  // Signed by hand: craftJwt would stringify the claims, which overflows here too.
  const b64 = (text: string) => Buffer.from(text).toString('base64url');
  const signingInput = `${b64(JSON.stringify({ alg: 'HS256', kid: key.id }))}.${b64(`{"aud":"${STATEBACKED_AUD}","exp":${inOneHour()},"act":{"sub":"u","x":${nested(5_000)}}}`)}`;
  const deepToken = `${signingInput}.${createHmac('sha256', Buffer.from(key.key, 'utf8')).update(signingInput).digest('base64url')}`;
  const byToken = await call(node.url, 'POST', '/machines/nest/i/i/events', { token: deepToken, body: { event: 'INC' } });
  t.equal(byToken.status, 403, 'a token whose claims nest 5,000 deep is refused');

  t.equal((await call(node.url, 'GET', '/health')).status, 200, 'the node is up');
  t.same(await history(), ['xstate.init', 'INC'], 'and nothing else was applied');
  t.notMatch(node.output().slice(outputBefore), 'sandbox worker died', 'no sandbox worker died');
});

t.test('state that machine code nests too deeply to persist is refused, and the instance stays as it was', async (t) => {
  const token = node.adminKey;
  const outputBefore = node.output().length;
  await machineWithVersion(node, 'deep-state', nester);
  t.equal((await call(node.url, 'POST', '/machines/deep-state', { token, body: { slug: 'i' } })).status, 200);

  t.equal(
    (await call(node.url, 'POST', '/machines/deep-state/i/i/events', { token, body: { event: { type: 'NEST', depth: 150 } } })).status,
    200,
    'a context 150 levels deep is kept',
  );
  for (const depth of [300, 1_500]) {
    const res = await call(node.url, 'POST', '/machines/deep-state/i/i/events', { token, body: { event: { type: 'NEST', depth } } });
    t.equal(res.status, 400, `a context ${depth} levels deep: 400`);
    t.equal(res.body?.code, 'state-too-large');
    t.match(res.body?.error, 'more than 200 levels deep');
  }
  // Deeper still, the isolate's own JSON.stringify gives up first.
  const deepest = await call(node.url, 'POST', '/machines/deep-state/i/i/events', {
    token,
    body: { event: { type: 'NEST', depth: 20_000 } },
  });
  t.equal(deepest.status, 400, 'a context 20,000 levels deep: 400');
  t.match(deepest.body, { code: 'machine-code-error', error: /not JSON-serialisable/ });
  t.equal(
    (await call(node.url, 'POST', '/machines/deep-state/i/i/events', { token, body: { event: 'INC' } })).status,
    200,
    'the next event is applied',
  );
  const events = await call(node.url, 'GET', '/machines/deep-state/i/i/events', { token });
  t.same(
    (events.body as { transitions: { event: { type: string } }[] }).transitions.map((tr) => tr.event.type),
    ['xstate.init', 'NEST', 'INC'],
  );
  const state = await call(node.url, 'GET', '/machines/deep-state/i/i/admin', { token });
  t.equal(state.status, 200);
  t.notMatch(node.output().slice(outputBefore), 'sandbox worker died', 'no sandbox worker died');
});

t.test('a key named __proto__ is refused in request bodies, and never sets a context prototype', async (t) => {
  const token = node.adminKey;
  const escalating = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'esc', initial: 'a', predictableActionArguments: true, context: { n: 0 }, states: { a: { on: {
  ESCALATE: { cond: (c) => c.role === 'admin', actions: assign({ n: () => 9999 }) },
} } } });
export const allowRead = () => true;
export const allowWrite = (r) => r.type !== 'initialization' || r.context.role === undefined || r.context.role === 'user';`;
  await machineWithVersion(node, 'esc', escalating);
  for (const rawBody of [
    '{"slug":"e1","context":{"__proto__":{"role":"admin"}}}',
    '{"slug":"e2","context":{"\\u005f_proto__":{"role":"admin"}}}',
  ]) {
    const res = await call(node.url, 'POST', '/machines/esc', { token, rawBody });
    t.equal(res.status, 400, `${rawBody}: 400`);
    t.match(res.body?.error, 'key named __proto__');
  }
  t.equal((await call(node.url, 'POST', '/machines/esc', { token, body: { slug: 'ok' } })).status, 200);
  const event = await call(node.url, 'POST', '/machines/esc/i/ok/events', {
    token,
    rawBody: '{"event":{"type":"ESCALATE","__proto__":{"x":1}}}',
  });
  t.equal(event.status, 400, 'in an event too');

  // Below the API (a context that reaches the sandbox some other way): a property, not the prototype.
  const vi = await VersionIsolate.load({ versionId: 'v', code: escalating });
  t.teardown(() => vi.dispose());
  const started = vi.start('o/esc/x', { context: JSON.parse('{"__proto__":{"role":"admin"}}') as Record<string, unknown> });
  t.same(Object.keys(started.context).sort(), ['__proto__', 'n']);
  t.equal(vi.send('o/esc/x', { type: 'ESCALATE' }).context.n, 0, 'the guard did not see an inherited role');
});

t.test('a number beyond the range of a double is refused in request bodies (it would become null without a word)', async (t) => {
  const token = node.adminKey;
  await machineWithVersion(node, 'big', nester);
  for (const rawBody of [
    '{"slug":"b1","context":{"n":1e400}}',
    `{"slug":"b2","context":{"n":-${'9'.repeat(400)}}}`,
    `{"slug":"b4","context":{"n":1${'0'.repeat(299)}e10}}`,
    `{"slug":"b5","context":{"n":${'9'.repeat(308)}.9e1}}`,
  ]) {
    const res = await call(node.url, 'POST', '/machines/big', { token, rawBody });
    t.equal(res.status, 400, `${rawBody.slice(0, 40)}: 400`);
    t.match(res.body, { code: 'invalid-parameter', error: /beyond the range of a double \(at key "n"\)/ });
  }
  const fine = await call(node.url, 'POST', '/machines/big', { token, rawBody: '{"slug":"b3","context":{"n":1e300,"m":"1e400"}}' });
  t.equal(fine.status, 200, 'a large finite number, and 1e400 in a string, are taken');
  const event = await call(node.url, 'POST', '/machines/big/i/b3/events', { token, rawBody: '{"event":{"type":"X","v":1E+999}}' });
  t.equal(event.status, 400, 'in an event too');
});
