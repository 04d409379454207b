import t from 'tap';
import { jsonDepth, tooDeep } from '../src/domain/json-depth.js';

/** `levels` arrays inside each other around `inner`, as text. */
const nested = (levels: number, inner = '0'): string => '['.repeat(levels) + inner + ']'.repeat(levels);

t.test('jsonDepth counts brackets outside strings only', async (t) => {
  t.equal(jsonDepth('1'), 0);
  t.equal(jsonDepth('{"a":[1,{"b":[]}]}'), 4);
  t.equal(jsonDepth('["[[[[", "\\"[[", {}]'), 2, 'brackets and escaped quotes inside strings do not count');
});

t.test('tooDeep at the limit, for texts just long enough and padded', async (t) => {
  for (const limit of [1, 5, 100, 200]) {
    // the shortest text nesting limit + 1 deep: 2 × (limit + 1) characters, the length the shortcut passes
    const shortest = '['.repeat(limit + 1) + ']'.repeat(limit + 1);
    t.equal(shortest.length, 2 * limit + 2);
    t.ok(tooDeep(shortest, limit), `${limit + 1} levels in the fewest characters is too deep for ${limit}`);
    t.notOk(tooDeep(nested(limit), limit), `${limit} levels is not too deep for ${limit}`);
    t.ok(tooDeep(nested(limit + 1, '"a long string that pads the text"'), limit), `${limit + 1} levels with a long value inside`);
    t.notOk(tooDeep(nested(limit, `"${'x'.repeat(4 * limit)}"`), limit), `${limit} levels in a long text is not too deep`);
  }
  t.notOk(tooDeep(nested(100)), 'the default limit is 100');
  t.ok(tooDeep(nested(101)));
});

t.test('a short text that opens more brackets than the limit without closing them is not JSON', async (t) => {
  // tooDeep lets it pass without scanning: what matters is that JSON.parse then refuses it.
  const unclosed = '['.repeat(150);
  t.notOk(tooDeep(unclosed, 100));
  t.throws(() => JSON.parse(unclosed), SyntaxError);
});
