import t from 'tap';
import { RecencyMap } from '../src/domain/recency-map.js';

const keys = <V>(map: RecencyMap<string, V>): string[] => [...map.entriesOldestFirst()].map(([key]) => key);

t.test('touch moves an entry only when more than staleAfter insertions came since it was inserted', async (t) => {
  const map = new RecencyMap<string, number>();
  for (const [i, key] of ['a', 'b', 'c', 'd'].entries()) map.set(key, i);
  t.equal(map.touch('c', 2), 2, 'c: 1 insertion since');
  t.same(keys(map), ['a', 'b', 'c', 'd'], 'not moved');
  t.equal(map.touch('b', 2), 1, 'b: 2 insertions since');
  t.same(keys(map), ['a', 'b', 'c', 'd'], 'not moved either');
  t.equal(map.touch('a', 2), 0, 'a: 3 insertions since');
  t.same(keys(map), ['b', 'c', 'd', 'a'], 'moved to the newest end');
  t.equal(map.touch('zz', 0), undefined, 'a missing key');
  t.equal(map.get('b'), 1, 'get counts no use');
  t.same(keys(map), ['b', 'c', 'd', 'a']);
  t.equal(map.oldestKey(), 'b');
});

t.test('set replaces at the newest end; deleting while iterating is safe', async (t) => {
  const map = new RecencyMap<string, number>();
  for (const [i, key] of ['a', 'b', 'c'].entries()) map.set(key, i);
  map.set('a', 10);
  t.same(keys(map), ['b', 'c', 'a']);
  t.equal(map.size, 3);
  for (const value of map.values()) if (value !== 10) t.ok(map.delete(value === 1 ? 'b' : 'c'));
  t.same(keys(map), ['a']);
  t.equal(new RecencyMap<string, number>().oldestKey(), undefined);
});
