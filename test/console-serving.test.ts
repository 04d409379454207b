/**
 * The web console's plain HTTP side, on a real `statehold serve`: its static files (content types,
 * cache and security headers, 404s for unknown files, no way out of dist/console) and the route the
 * console draws statecharts from, GET /machines/{m}/v/{version}/definition (v4 and v5 machines, its
 * scope, its 404s).
 */
import { createHmac } from 'node:crypto';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { importing5 } from './fixtures/xstate-v5/machines.js';

const node = await startNode({ args: ['--page-size', '2'] });
t.teardown(() => node.stop());
const admin = node.adminKey as string;

const TOGGLE4 = `
import { createMachine } from 'xstate';
export const allowRead = () => true;
export const allowWrite = () => true;
export default createMachine({ id: 'toggle', initial: 'off', predictableActionArguments: true,
  states: {
    off: { tags: ['dark'], on: { TOGGLE: 'on' } },
    on: { initial: 'dim', on: { TOGGLE: 'off' }, after: { 60000: '.bright' },
      states: { dim: { on: { BRIGHTER: { target: 'bright', cond: () => true } } }, bright: { always: { target: '#toggle.off', cond: () => false } } } },
    done: { type: 'final' } } });`;

const TOGGLE5 = importing5(`
export default createMachine({ id: 'lamp5', initial: 'off',
  states: {
    off: { on: { TOGGLE: 'on', constructor: 'on' } },
    on: { type: 'parallel', on: { TOGGLE: 'off' },
      states: { a: { initial: 'x', states: { x: {}, y: {} } }, b: { initial: 'p', states: { p: { after: { 500: 'q' } }, q: {} } } } } } });`);

t.test('the console is served at /console with content types, caching and security headers', async (t) => {
  for (const path of ['/console', '/console/', '/console/index.html', '/console/machines']) {
    const page = await call(node.url, 'GET', path);
    t.equal(page.status, 200, path);
    t.equal(page.headers['content-type'], 'text/html; charset=utf-8', path);
    t.equal(page.headers['cache-control'], 'no-cache', path);
    t.match(page.headers['content-security-policy'], /default-src 'none'; script-src 'self'/);
    t.equal(page.headers['x-content-type-options'], 'nosniff');
    t.match(page.text, /<title>Statehold console<\/title>/);
  }
  const page = await call(node.url, 'GET', '/console/');
  // The build names its files by content hash: the page names them, and they are cached for good.
  const script = /src="\/console\/(app-[A-Z0-9]+\.js)"/.exec(page.text)?.[1];
  const style = /href="\/console\/(app-[A-Z0-9]+\.css)"/.exec(page.text)?.[1];
  t.ok(script, 'the page names its script');
  t.ok(style, 'the page names its styles');
  const js = await call(node.url, 'GET', `/console/${script}`);
  t.equal(js.status, 200);
  t.equal(js.headers['content-type'], 'text/javascript; charset=utf-8');
  t.equal(js.headers['cache-control'], 'public, max-age=31536000, immutable');
  t.ok(js.text.length > 10_000, 'the bundle holds the app and its libraries');
  // The page loads only its own files (the browser test sees every request it makes stay on the node).
  t.same(
    [...page.text.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]).filter((url) => !url?.startsWith('/console/') && url !== 'data:,'),
    [],
  );
  t.notMatch(js.text, /import\(\s*["'`]https?:/, 'no module is imported from elsewhere');
  const css = await call(node.url, 'GET', `/console/${style}`);
  t.equal(css.headers['content-type'], 'text/css; charset=utf-8');
  const head = await call(node.url, 'HEAD', `/console/${script}`);
  t.equal(head.status, 200);
  t.equal(head.headers['content-length'], String(Buffer.byteLength(js.text)));
});

t.test('unknown files are 404 with the API error shape, and no path leaves the console files', async (t) => {
  const missing = await call(node.url, 'GET', '/console/nope.js');
  t.equal(missing.status, 404);
  t.same(missing.body, { error: 'the console has no file nope.js', code: 'not-found' });
  for (const path of [
    '/console/..%2F..%2Fpackage.json',
    '/console/%2e%2e%2fbin%2fstatehold.js',
    '/console/../package.json',
    '/console/..%5c..%5cpackage.json',
    '/console/app.js%00.html',
    '/console/a/b/../../../../etc/passwd',
  ]) {
    const answer = await call(node.url, 'GET', path);
    t.equal(answer.status, 404, path);
    t.notMatch(answer.text, /"name": "statehold"|root:/, path);
  }
  const post = await call(node.url, 'POST', '/console/index.html');
  t.equal(post.status, 405);
});

t.test('GET /machines/{m}/v/{version}/definition: a v4 machine, drawn from its state nodes', async (t) => {
  const { machineVersionId } = await machineWithVersion(node, 'toggle', TOGGLE4);
  const answer = await call(node.url, 'GET', `/machines/toggle/v/${machineVersionId}/definition`, { token: admin });
  t.equal(answer.status, 200, answer.text);
  const { definition } = answer.body;
  t.equal(definition.xstate, 4);
  t.equal(definition.truncated, false);
  t.match(definition.root, { key: 'toggle', id: 'toggle', type: 'compound', initial: 'off' });
  t.same(
    definition.root.states.map((s: { key: string; type: string }) => [s.key, s.type]),
    [
      ['off', 'atomic'],
      ['on', 'compound'],
      ['done', 'final'],
    ],
  );
  const [off, on] = definition.root.states;
  t.same(off.tags, ['dark']);
  t.same(off.transitions, [{ event: 'TOGGLE', targets: ['toggle.on'] }]);
  t.equal(on.initial, 'dim');
  t.same(
    on.transitions.map((tr: { event: string; targets: string[] }) => [tr.event.replace(/\(.*/, '(…)'), tr.targets]),
    [
      ['TOGGLE', ['toggle.off']],
      ['xstate.after(…)', ['toggle.on.bright']],
    ],
  );
  const [dim, bright] = on.states;
  t.same(dim.transitions, [{ event: 'BRIGHTER', targets: ['toggle.on.bright'], guarded: true }]);
  t.same(bright.transitions, [{ event: '', targets: ['toggle.off'], guarded: true }]);
  t.notMatch(answer.text, /=>|function/, 'no code, only data');
});

t.test('a v5 machine: parallel states, delays, event types named like Object.prototype members', async (t) => {
  const { machineVersionId } = await machineWithVersion(node, 'lamp5', TOGGLE5);
  const answer = await call(node.url, 'GET', `/machines/lamp5/v/${machineVersionId}/definition`, { token: admin });
  t.equal(answer.status, 200, answer.text);
  const { definition } = answer.body;
  t.equal(definition.xstate, 5);
  const [off, on] = definition.root.states;
  t.same(
    off.transitions.map((tr: { event: string }) => tr.event),
    ['TOGGLE', 'constructor'],
  );
  t.equal(on.type, 'parallel');
  t.equal(on.initial, undefined);
  const [a, b] = on.states;
  t.equal(a.initial, 'x');
  t.match(b.states[0].transitions, [{ event: /^xstate\.after\.500\./, targets: ['lamp5.on.b.q'] }]);
});

t.test('the definition route: scope, unknown machine or version, credentials', async (t) => {
  const { machineVersionId } = await machineWithVersion(node, 'scoped', TOGGLE4);
  const keyFor = async (scopes: string[]) => {
    const created = await call(node.url, 'POST', '/keys', { token: admin, body: { name: 'k', scopes } });
    const { id, key } = created.body as { id: string; key: string };
    const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const unsigned = `${b64({ alg: 'HS256', kid: id })}.${b64({ act: { sub: 'u' }, aud: 'https://api.statebacked.dev/', iat: now, exp: now + 600 })}`;
    return `${unsigned}.${createHmac('sha256', key).update(unsigned).digest('base64url')}`;
  };
  const path = `/machines/scoped/v/${machineVersionId}/definition`;
  const reader = await keyFor(['machine-versions.read']);
  t.equal((await call(node.url, 'GET', path, { token: reader })).status, 200);
  const other = await keyFor(['state.read']);
  const refused = await call(node.url, 'GET', path, { token: other });
  t.equal(refused.status, 403);
  t.equal(refused.body.code, 'missing-scope');
  const anonymous = await call(node.url, 'GET', path);
  t.equal(anonymous.status, 403);
  t.ok(typeof anonymous.body.error === 'string' && anonymous.body.code);
  const unknownVersion = await call(node.url, 'GET', '/machines/scoped/v/ver_AAAAAAAAAAAAAAAAAAAAAA/definition', { token: admin });
  t.equal(unknownVersion.status, 404);
  t.same(unknownVersion.body, { error: 'machine scoped has no version ver_AAAAAAAAAAAAAAAAAAAAAA', code: 'not-found' });
  const notAnId = await call(node.url, 'GET', '/machines/scoped/v/nope/definition', { token: admin });
  t.equal(notAnId.status, 404);
  const unknownMachine = await call(node.url, 'GET', `/machines/nope/v/${machineVersionId}/definition`, { token: admin });
  t.equal(unknownMachine.status, 404);
  t.equal(unknownMachine.body.code, 'not-found');
  // A version of another machine is not this machine's.
  const crossed = await call(node.url, 'GET', `/machines/toggle/v/${machineVersionId}/definition`, { token: admin });
  t.equal(crossed.status, 404);
});

t.test("GET /machines/{m}/i?prefix= (the console's search): only names with the prefix, paged, in order", async (t) => {
  await machineWithVersion(node, 'named', TOGGLE4);
  for (const slug of ['a', 'ab', 'ab-1', 'ab_2', 'abc', 'ac', 'b', 'aa']) {
    t.equal((await call(node.url, 'POST', '/machines/named', { token: admin, body: { slug } })).status, 200);
  }
  const all = async (prefix: string) => {
    const names: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const page = await call(node.url, 'GET', `/machines/named/i?prefix=${prefix}${cursor ? `&cursor=${cursor}` : ''}`, { token: admin });
      t.equal(page.status, 200, page.text);
      names.push(...page.body.instances.map((i: { slug: string }) => i.slug));
      cursor = page.body.cursor;
      if (!cursor) break;
    }
    return names;
  };
  t.same(await all('ab'), ['ab', 'ab-1', 'ab_2', 'abc']);
  t.same(await all('a'), ['a', 'aa', 'ab', 'ab-1', 'ab_2', 'abc', 'ac']);
  t.same(await all('b'), ['b']);
  t.same(await all('zz'), []);
  t.same(await all(''), ['a', 'aa', 'ab', 'ab-1', 'ab_2', 'abc', 'ac', 'b']);
  const bad = await call(node.url, 'GET', '/machines/named/i?prefix=a%2Fb', { token: admin });
  t.equal(bad.status, 400);
  t.same(bad.body.parameter, 'prefix');
});
