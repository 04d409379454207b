import t from 'tap';
import { type VerifiedToken, VerifiedTokenCache } from '../src/auth/verified-token-cache.js';

const verified = (keyId = 'sbk_a', expiresAtMs = 10_000): VerifiedToken => ({ keyId, expiresAtMs, authContext: { sub: keyId } });

t.test('a hit returns what was set; an expired hit is a miss and is dropped', async (t) => {
  const cache = new VerifiedTokenCache(4);
  const entry = verified('sbk_a', 1_000);
  cache.set('a', entry);
  t.equal(cache.get('a', 999), entry);
  t.equal(cache.get('b', 999), undefined, 'unknown token');
  t.equal(cache.get('a', 1_000), undefined, 'at exp: a miss');
  t.equal(cache.size, 0, 'and gone');
});

t.test('never holds more than its capacity; the oldest goes first', async (t) => {
  const cache = new VerifiedTokenCache(4);
  for (const token of ['a', 'b', 'c', 'd', 'e']) cache.set(token, verified());
  t.equal(cache.size, 4);
  t.equal(cache.get('a', 0), undefined, 'the first inserted was evicted');
  for (const token of ['b', 'c', 'd', 'e']) t.ok(cache.get(token, 0), `${token} kept`);
  cache.set('c', verified('sbk_b'));
  t.equal(cache.size, 4, 'setting a token again does not grow the cache');
  t.equal(cache.get('c', 0)?.keyId, 'sbk_b', 'and replaces its entry');
});

t.test('a token in use is not evicted: a hit in the older half moves it to the newest end', async (t) => {
  const cache = new VerifiedTokenCache(4);
  for (const token of ['a', 'b', 'c', 'd']) cache.set(token, verified());
  t.ok(cache.get('a', 0), 'a was inserted 4 insertions ago (more than 4 / 2): this hit moves it');
  cache.set('e', verified());
  t.ok(cache.get('a', 0), 'a kept');
  t.equal(cache.get('b', 0), undefined, 'b, now the oldest, evicted');

  // A token goes only once capacity / 2 others were inserted since its last hit: hit every 4 of 10, it stays.
  const big = new VerifiedTokenCache(10);
  big.set('hot', verified());
  for (let i = 0; i < 200; i++) {
    big.set(`cold-${i}`, verified());
    if (i % 4 === 3) t.ok(big.get('hot', 0), `hot still cached after ${i + 1} others`);
  }
  t.equal(big.size, 10);
  // Hit at exactly capacity / 2 insertions old it is not moved, so it goes capacity / 2 insertions later.
  const edge = new VerifiedTokenCache(10);
  edge.set('x', verified());
  for (let i = 0; i < 5; i++) edge.set(`other-${i}`, verified());
  t.ok(edge.get('x', 0), 'hit at 5 insertions old');
  for (let i = 5; i < 9; i++) edge.set(`other-${i}`, verified());
  t.ok(edge.get('x', 0), 'still there 4 insertions after that hit; this hit (9 insertions old) moves it');
  for (let i = 9; i < 17; i++) edge.set(`other-${i}`, verified());
  t.ok(edge.get('x', 0), 'so 8 more insertions later it is still there (unmoved, it would have gone at the 10th)');
});

t.test('a hit in the newer half leaves the order as it is', async (t) => {
  const cache = new VerifiedTokenCache(4);
  for (const token of ['a', 'b', 'c', 'd']) cache.set(token, verified());
  t.ok(cache.get('c', 0), 'c was inserted 2 insertions ago: not moved');
  cache.set('e', verified());
  cache.set('f', verified());
  t.ok(cache.get('c', 0), 'c kept: a and b were older');
  t.equal(cache.get('a', 0), undefined);
  t.equal(cache.get('b', 0), undefined);
});

t.test('forgetKey drops every token of that key', async (t) => {
  const cache = new VerifiedTokenCache(8);
  cache.set('a', verified('sbk_a'));
  cache.set('b', verified('sbk_b'));
  cache.set('c', verified('sbk_a'));
  cache.forgetKey('sbk_a');
  t.equal(cache.size, 1);
  t.equal(cache.get('a', 0), undefined);
  t.ok(cache.get('b', 0));
});
