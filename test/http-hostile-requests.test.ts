/**
 * Hostile and malformed requests, drawn at random (a fixed seed) from every route's method and shape:
 * odd path segments, queries, bodies, content types, credentials and headers. Each must get an answer
 * below 500, every 4xx but 405 with a JSON error body, and the node must stay up and serve after.
 */
import { request } from 'undici';
import t from 'tap';
import { TOGGLE } from './fixtures/machines.js';
import { bundleLikeSmply } from './helpers/bundle.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

const node = await startNode();
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const { operator } = await machineWithVersion(node, 'toggle', await bundleLikeSmply(TOGGLE));
await operator.machineInstances.create('toggle', { slug: 'one' });

/** A small seeded generator (mulberry32), so that a failure can be run again as it was. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};

const routes = [
  'DELETE /machines/:m',
  'DELETE /machines/:m/i/:i',
  'DELETE /keys/:k',
  'GET /machines/:m',
  'GET /machines/:m/i',
  'GET /machines/:m/i/:i',
  'GET /machines/:m/i/:i/admin',
  'GET /machines/:m/i/:i/events',
  'GET /machines/:m/indexes/:x/query',
  'GET /machines/:m/v',
  'GET /machines/:m/v/:v/definition',
  'GET /logs',
  'GET /usage',
  'GET /keys',
  'PATCH /orgs/:o',
  'POST /idps',
  'POST /keys',
  'POST /machines',
  'POST /machines/:m',
  'POST /machines/:m/i/:i/events',
  'POST /machines/:m/migrations',
  'POST /machines/:m/v',
  'POST /orgs',
  'POST /token-providers',
  'POST /tokens',
  'PUT /machines/:m/i/:i/status',
  'PUT /machines/:m/i/:i/v',
  'PUT /machines/:m/migrations/:s',
  'PUT /machines/:m/v/:s',
  'POST /http-api/:o/machines/:m/:i',
].map((line) => line.split(' ') as [string, string]);
const segments = [
  'toggle',
  'one',
  'nope',
  '%',
  '%zz',
  '%00',
  'a'.repeat(300),
  '..',
  'ä',
  '%F0%9F%98%80',
  'x%20y',
  '__proto__',
  'constructor',
  'a.b',
  '*',
  '-1',
];
const queries = [
  '',
  '?limit=-1',
  '?limit=abc',
  '?limit=1e99',
  '?cursor=%%%',
  `?cursor=${'z'.repeat(3000)}`,
  '?gzip=1',
  '?op=zz&value=',
  '?a=1&a=2',
  '?limit=0',
];
const deep = JSON.stringify({ event: { type: 'toggle', deep: JSON.parse(`${'['.repeat(300)}${']'.repeat(300)}`) } });
const bodies = [
  undefined,
  '',
  '{',
  'null',
  '[]',
  '"x"',
  '1',
  '{"event":null}',
  '{"event":{"type":1}}',
  deep,
  JSON.stringify({ slug: 'a'.repeat(1000) }),
  JSON.stringify({ slug: 'ok', context: 'text' }),
  JSON.stringify({ slug: 'p', authContext: [1] }),
  '{"slug":"\\ud800"}',
  '{"__proto__":{"x":1},"slug":"q"}',
  JSON.stringify({ status: 7 }),
  JSON.stringify({ clientInfo: 'x'.repeat(20_000) }),
  JSON.stringify({ scopes: ['nope'] }),
  JSON.stringify({ event: 'toggle' }),
];
const types = ['application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined];
const credentials = [
  `Bearer ${admin}`,
  `Bearer ${admin}`,
  `Bearer ${admin}`,
  'Bearer',
  'Bearer x.y.z',
  'Basic abc',
  `Bearer ${'a'.repeat(5000)}`,
  undefined,
];

t.test('1,000 requests drawn at random: no 5xx, every refusal says why, the node serves after', async (t) => {
  const random = seeded(20261130);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const orgs = await request(`${node.url}/orgs`, { headers: { authorization: `Bearer ${admin}` } });
  const orgId = ((await orgs.body.json()) as { orgs: Array<{ id: string }> }).orgs[0]?.id as string;
  const wrong: string[] = [];
  for (let i = 0; i < 1000; i++) {
    const [method, pattern] = pick(routes);
    const path = pattern.replace(/:([a-z])/g, (_, name: string) => (name === 'o' && random() < 0.7 ? orgId : pick(segments)));
    const body = method === 'GET' || method === 'DELETE' ? undefined : pick(bodies);
    const headers: Record<string, string> = {};
    const credential = pick(credentials);
    if (credential) headers.authorization = credential;
    const type = pick(types);
    if (type) headers['content-type'] = type;
    if (random() < 0.1) headers['x-statebacked-org-id'] = pick([orgId, 'org_x', '%']);
    if (random() < 0.1) headers['x-statebacked-act'] = pick(['{}', '{"sub":1}', 'not json', '{"sub":"u"}']);
    const url = `${node.url}${path}${pick(queries)}`;
    const answer = await request(url, { method, headers, body, headersTimeout: 20_000, bodyTimeout: 20_000 });
    const text = await answer.body.text();
    if (answer.statusCode >= 500 || (answer.statusCode >= 400 && answer.statusCode !== 405 && !/"error"/.test(text)))
      wrong.push(`${answer.statusCode} ${method} ${url.slice(0, 160)} ${String(body).slice(0, 60)} -> ${text.slice(0, 160)}`);
  }
  t.same(wrong, [], 'every answer below 500, every refusal with an error body');
  const health = await request(`${node.url}/health`);
  t.equal(health.statusCode, 200, 'the node still serves');
  await health.body.dump();
});
