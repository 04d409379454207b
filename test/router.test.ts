import t from 'tap';
import type { ApiResponse } from '../src/api/http-types.js';
import { Router } from '../src/api/router.js';

const answer = (name: string) => (): ApiResponse => ({ status: 200, body: { route: name } });
const routeOf = (match: ReturnType<Router['match']>): unknown =>
  match.kind === 'found' ? (match.handler({} as never) as ApiResponse).body : match;

const router = new Router()
  .add('get', '/machines/:machine/i/:instance', answer('instance'))
  .add('post', '/machines/:machine/i/:instance/events', answer('event'))
  .add('get', '/machines/:machine/i/:instance/events', answer('history'))
  .add('get', '/machines/:machine/i/special', answer('literal'))
  .add('get', '/machines/:machine', answer('machine'))
  .add('post', '/machines', answer('create machine'))
  .add('get', '/things/:id/:rest', answer('two captures'));

t.test('the route whose literals and method match, with its captures percent-decoded', async (t) => {
  const found = router.match('GET', '/machines/cart/i/one');
  t.same(routeOf(found), { route: 'instance' });
  t.same(found.kind === 'found' && found.params, { machine: 'cart', instance: 'one' });
  t.equal(
    found.kind === 'found' && found.pattern,
    '/machines/:machine/i/:instance',
    'the pattern it was added with (what metrics count by)',
  );
  t.same(routeOf(router.match('POST', '/machines/cart/i/one/events')), { route: 'event' });
  t.same(routeOf(router.match('GET', '/machines/cart/i/one/events')), { route: 'history' }, 'the method picks among same-shaped routes');
  t.same(routeOf(router.match('POST', '/machines/')), { route: 'create machine' }, 'empty segments at the ends are ignored');
  t.same(routeOf(router.match('GET', '//machines/cart//')), { route: 'machine' });
  t.same(router.match('GET', '/machines//i/one'), { kind: 'none' }, 'an empty segment between two names no route');
  t.same(router.match('GET', '/machines/cart/i/'), { kind: 'none' }, 'not /machines/:machine/i/:instance with an empty instance');
  t.same(router.match('GET', '/machines//i'), { kind: 'none' }, 'not /machines/:machine with machine "i"');
  const decoded = router.match('GET', '/things/a%2Fb/%C3%A9%20x');
  t.same(decoded.kind === 'found' && decoded.params, { id: 'a/b', rest: 'é x' });
});

t.test('a literal segment wins over a capture', async (t) => {
  t.same(routeOf(router.match('GET', '/machines/cart/i/special')), { route: 'literal' });
  t.same(routeOf(router.match('GET', '/machines/cart/i/specials')), { route: 'instance' });
});

t.test('other methods, malformed captures, invalid names and unknown paths', async (t) => {
  t.same(
    router.match('DELETE', '/machines/cart/i/one/events'),
    { kind: 'wrong-method', allowed: ['POST', 'GET'] },
    'the methods the path has',
  );
  t.same(
    router.match('GET', '/things/%E0%A4%A/x'),
    { kind: 'bad-path', message: 'path segment %E0%A4%A is not valid percent-encoding' },
    'a capture that does not percent-decode is a bad path, not a missing one',
  );
  t.same(router.match('GET', '/machines/not%20a%20slug'), { kind: 'no-such-thing', message: 'machine not a slug does not exist' });
  t.same(router.match('GET', '/machines/cart/i'), { kind: 'none' }, 'a path no route has that many segments for');
  t.same(router.match('GET', '/nothing/here/at/all'), { kind: 'none' });
});

t.test("what the server checks before reading a body: a route's own body limit, and whether it takes a credential", async (t) => {
  const router = new Router().add('post', '/tokens', answer('tokens'), { maxBodyBytes: 65_536 });
  router.credentialed(() => router.add('post', '/machines/:machine', answer('create')).add('get', '/machines/:machine', answer('get')));
  router.add('post', '/uploads/code', answer('upload'));
  const found = (method: string, path: string) => {
    const match = router.match(method, path);
    return match.kind === 'found' ? { credential: match.credential, maxBodyBytes: match.maxBodyBytes } : match.kind;
  };
  t.same(found('POST', '/tokens'), { credential: false, maxBodyBytes: 65_536 });
  t.same(found('POST', '/machines/m'), { credential: true, maxBodyBytes: undefined }, 'added within credentialed(): the node-wide limit');
  t.same(found('GET', '/machines/m'), { credential: true, maxBodyBytes: undefined });
  t.same(
    found('POST', '/uploads/code'),
    { credential: false, maxBodyBytes: 4096 },
    'added after it: none, so a stray body of 4 KiB at most',
  );
  t.equal(found('PUT', '/tokens'), 'wrong-method');
});

t.test('the most specific pattern that matches a path answers alone; absent routes say why they are absent', async (t) => {
  const router = new Router()
    .add('get', '/machines', answer('list'))
    .add('post', '/machines', answer('create'))
    .absent('put', '/:code', 'no invitations here')
    .absent('post', '/org-members', 'no members here');
  t.same(router.match('PUT', '/abc'), { kind: 'no-such-thing', message: 'no invitations here' });
  t.same(
    router.match('PUT', '/machines'),
    { kind: 'wrong-method', allowed: ['GET', 'POST'] },
    'a literal route takes its path from a capture',
  );
  t.same(router.match('POST', '/org-members'), { kind: 'no-such-thing', message: 'no members here' });
  t.same(router.match('GET', '/org-members'), { kind: 'none' }, 'an absent route offers no method');
  t.same(routeOf(router.match('GET', '/machines')), { route: 'list' });
  t.same(
    router.list(),
    [
      { method: 'GET', pattern: '/machines' },
      { method: 'POST', pattern: '/machines' },
    ],
    'absent routes are not listed',
  );
});
