import t from 'tap';
import {
  applyMapping,
  compilePath,
  MAX_MAPPING_DEPTH,
  MAX_MAPPING_ENTRIES,
  MappingError,
  queryPath,
  validateMapping,
} from '../src/auth/claim-mapping.js';

const claims = {
  sub: 'user-1',
  role: { id: 'admin', name: 'Admin' },
  groups: ['a', 'b', 'c'],
  orgs: [
    { id: 'o1', tier: 'free' },
    { id: 'o2', tier: 'pro' },
  ],
  'https://example.com/roles': ['editor'],
  'we]ird': 'w',
};

t.test('the wire-protocol example: paths, a literal, a nested mapping', async (t) => {
  const mapping = { 'sub.$': '$.sub', service: 'my-service', special: { 'role.$': '$.role.id' } };
  t.equal(validateMapping(mapping), undefined);
  t.same(applyMapping(mapping, { sub: 'user-1', role: { id: 'admin' } }), {
    sub: 'user-1',
    service: 'my-service',
    special: { role: 'admin' },
  });
});

t.test('the anonymous IdP and token provider mappings compose (wire-protocol §4.2)', async (t) => {
  const idp = { 'sid.$': '$.sid', 'did.$': '$.did' };
  const provider = { 'sid.$': '$.sid', 'did.$': '$.did', auth: 'anonymous' };
  const intermediate = applyMapping(idp, { aud: 'x', iss: 'x', iat: 1, exp: 2, sid: 's1', did: 'd1' });
  t.same(intermediate, { sid: 's1', did: 'd1' });
  t.same(applyMapping(provider, intermediate), { sid: 's1', did: 'd1', auth: 'anonymous' });
});

t.test('a path without $ is relative to the root', async (t) => {
  t.same(applyMapping({ 'sub.$': 'sub', 'role.$': 'role.id', 'first.$': 'groups[0]', 'ids.$': '..id' }, claims), {
    sub: 'user-1',
    role: 'admin',
    first: 'a',
    ids: ['admin', 'o1', 'o2'],
  });
  t.same(applyMapping({ 'x.$': '[0]' }, claims), {}, '[0] is $[0]: the root is not an array');
});

t.test('a path that matches nothing leaves its key out', async (t) => {
  const out = applyMapping({ 'missing.$': '$.nope', 'deep.$': '$.role.nope.id', 'none.$': '$.orgs[*].nope', keep: 1 }, claims);
  t.same(out, { keep: 1 });
  t.notOk('missing' in out);
  t.notOk('none' in out, 'an indefinite path with no match is left out too, not []');
});

t.test('several matches: the value for a definite path, an array for any other', async (t) => {
  t.same(
    applyMapping(
      {
        'tier.$': '$.orgs[1].tier',
        'last.$': '$.groups[-1]',
        'tiers.$': '$.orgs[*].tier',
        'ids.$': '$..id',
        'two.$': '$.groups[0,2]',
        'tail.$': '$.groups[1:]',
        'reversed.$': '$.groups[::-1]',
        'one.$': '$.orgs[*].id[0]',
        'single.$': '$.role.*',
      },
      claims,
    ),
    {
      tier: 'pro',
      last: 'c',
      tiers: ['free', 'pro'],
      ids: ['admin', 'o1', 'o2'],
      two: ['a', 'c'],
      tail: ['b', 'c'],
      reversed: ['c', 'b', 'a'],
      single: ['admin', 'Admin'],
    },
  );
  t.same(applyMapping({ 'one.$': '$.groups[1:2]' }, claims), { one: ['b'] }, 'an indefinite path gives an array even for one match');
  t.same(applyMapping({ 'all.$': '$' }, { a: 1 }), { all: { a: 1 } }, '$ alone is the whole input');
});

t.test('quoted names reach claims that are not identifiers; prototype members are never reached', async (t) => {
  t.same(applyMapping({ 'roles.$': "$['https://example.com/roles']", 'w.$': "$['we]ird']", 'w2.$': '$["we]ird"]' }, claims), {
    roles: ['editor'],
    w: 'w',
    w2: 'w',
  });
  t.same(applyMapping({ 'c.$': '$.constructor', 'p.$': '$.__proto__', 't.$': '$.sub.length', 'l.$': '$.groups.length' }, claims), {});
  const input = JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
  const out = applyMapping({ 'p2.$': '$.__proto__' }, input);
  t.same(out, { p2: { polluted: true } }, 'an own __proto__ member of the input is an ordinary value, not a prototype');
  t.equal(Object.getPrototypeOf(out), Object.prototype);
  t.equal((out as { polluted?: unknown }).polluted, undefined);
});

t.test('literals: strings that look like paths, arrays (even of mappings), numbers, null', async (t) => {
  const mapping = { a: '$.sub', b: [{ 'sub.$': '$.sub' }], c: 3, d: null, e: true, f: {} };
  t.same(applyMapping(mapping, claims), mapping);
});

t.test('filters and scripts are refused, never evaluated', async (t) => {
  for (const path of ['$.orgs[?(@.tier == "pro")]', '$.orgs[?@.tier]', '$.orgs[(@.length-1)]', '$.orgs[?(process.exit(1))]']) {
    const problem = validateMapping({ 'x.$': path });
    t.match(problem, /not a supported JSONPath \((filter selectors|unexpected token '\('|unexpected filter selector)/, path);
    t.throws(() => applyMapping({ 'x.$': path }, claims), MappingError, `applyMapping refuses ${path} too`);
  }
});

t.test('validateMapping names the problem', async (t) => {
  const cases: [unknown, RegExp][] = [
    [null, /must be a JSON object/],
    [[], /must be a JSON object/],
    ['$.sub', /must be a JSON object/],
    [{ 'sub.$': 1 }, /value of sub\.\$ must be a JSONPath string/],
    [{ a: { 'sub.$': { x: 1 } } }, /value of a\.sub\.\$ must be a JSONPath string/],
    [{ 'sub.$': '' }, /not a supported JSONPath \(empty\)/],
    [{ 'sub.$': '$.a[' }, /unclosed bracketed selection/],
    [{ 'sub.$': "$['a" }, /unclosed string/],
    [{ 'sub.$': '$.a b' }, /not a supported JSONPath/],
    [{ 'sub.$': '$..' }, /bald descendant segment/],
    [{ 'sub.$': '$.a^' }, /not a supported JSONPath/],
    [{ 'sub.$': '$.*~' }, /not a supported JSONPath/],
    [{ 'sub.$': '$.a[01]' }, /not a supported JSONPath/],
    [{ 'sub.$': '$.' + 'a'.repeat(2000) }, /longer than/],
    [{ sub: 1, 'sub.$': '$.sub' }, /"sub" is given twice/],
    [{ '.$': '$.sub' }, /names no output key/],
    [{ '__proto__.$': '$.sub' }, /output key "__proto__" \(at __proto__\.\$\) is not allowed/],
    [{ a: { '__proto__.$': '$.sub' } }, /output key "__proto__" \(at a\.__proto__\.\$\) is not allowed/],
    [JSON.parse('{"__proto__":{"x":1}}'), /output key "__proto__" \(at __proto__\) is not allowed/],
  ];
  for (const [mapping, problem] of cases) t.match(validateMapping(mapping), problem, JSON.stringify(mapping).slice(0, 60));
  let deep: Record<string, unknown> = { 'x.$': '$.sub' };
  for (let i = 1; i < MAX_MAPPING_DEPTH; i++) deep = { n: deep };
  t.equal(validateMapping(deep), undefined, `${MAX_MAPPING_DEPTH} levels are fine`);
  t.match(validateMapping({ n: deep }), /deeper than/);
  const wide = Object.fromEntries(Array.from({ length: MAX_MAPPING_ENTRIES + 1 }, (_, i) => [`k${i}`, i]));
  t.match(validateMapping(wide), /more than 1000 keys/);
});

t.test('definite and indefinite paths', async (t) => {
  const definite = (p: string) => {
    const c = compilePath(p);
    return c.ok ? c.path.definite : undefined;
  };
  for (const p of ['$', '$.a', "$['a'].b[0]", 'a.b', '$[-1]']) t.equal(definite(p), true, p);
  for (const p of ['$.*', '$..a', '$[0,1]', '$[1:]', "$['a','b']", '$.a[*]']) t.equal(definite(p), false, p);
});

t.test('evaluation is bounded: a costly path on a large input fails instead of running on', async (t) => {
  const big = { items: Array.from({ length: 2_000 }, (_, i) => ({ i, tags: Array.from({ length: 20 }, (_, j) => j) })) };
  t.equal(queryPath('$.items[*].i', big).length, 2_000, 'ordinary paths on it work');
  for (const path of ['$..*..*..*', `$..[*,*,*,*,*,*,*,*]${'[*]'.repeat(60)}.nope`, `$..*${'[*]'.repeat(14)}.nope`]) {
    const started = performance.now();
    t.throws(() => applyMapping({ 'x.$': path }, big), /visits more than/, path.slice(0, 30));
    t.ok(performance.now() - started < 1_000, `and stops soon (${Math.round(performance.now() - started)} ms)`);
  }
  t.throws(
    () => applyMapping({ 'x.$': '$..[*,*,*,*,*,*,*,*]' }, { a: Array.from({ length: 500 }, () => 'x'.repeat(100)) }),
    /selects more than 65536 bytes/,
    'what is selected is bounded too',
  );
  t.throws(
    () => applyMapping({ 'x.$': '$.a' }, JSON.parse('{"a": {"__proto__": {"admin": true}}}')),
    /__proto__/,
    'no __proto__ key reaches the output',
  );
  const deep = JSON.parse('['.repeat(5_000) + ']'.repeat(5_000)) as unknown;
  t.equal(queryPath('$..nope', { deep }).length, 0, 'descent through 5,000 levels does not recurse on the stack');
});

t.test('a mapping stored before __proto__ was refused as an output key fails when applied', async (t) => {
  for (const mapping of [{ '__proto__.$': '$.sub' }, { a: { '__proto__.$': '$.sub' } }, JSON.parse('{"__proto__": {"isAdmin": true}}')])
    t.throws(() => applyMapping(mapping, { sub: { isAdmin: true } }), MappingError, JSON.stringify(mapping));
});
