/**
 * Credential and upload abuse against a real node (regression tests; all expected to pass).
 */
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { craftJwt, inOneHour, STATEBACKED_AUD } from './helpers/tokens.js';

const node = await startNode();
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const orgA = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs[0].id as string;
const orgB = (await call(node.url, 'POST', '/orgs', { token: admin, body: { name: 'other' } })).body.id as string;
const key = (
  await call(node.url, 'POST', '/keys', {
    token: admin,
    body: { name: 'k', scopes: ['machines.read', 'machines.write', 'machine-versions.write'] },
    headers: { 'x-statebacked-org-id': orgA },
  })
).body as { id: string; key: string };
const base = { aud: STATEBACKED_AUD, exp: inOneHour(), act: { sub: 'u' } };
const good = craftJwt({ alg: 'HS256', kid: key.id }, base, key.key);

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

t.test('JWT edge cases are refused', async (t) => {
  t.equal((await call(node.url, 'GET', '/machines', { token: good })).status, 200, 'baseline');
  const b64 = (v: string) => Buffer.from(v).toString('base64url');
  const [h, p, s] = good.split('.') as [string, string, string];
  const cases: [string, string][] = [
    ['lowercase alg', craftJwt({ alg: 'hs256', kid: key.id }, base, key.key)],
    ['alg with space', craftJwt({ alg: 'HS256 ', kid: key.id }, base, key.key)],
    [
      'duplicate alg, none last',
      craftJwt({ alg: 'HS256', kid: key.id }, base, key.key).replace(/^[^.]+/, b64(`{"alg":"HS256","kid":"${key.id}","alg":"none"}`)),
    ],
    ['exp as string', craftJwt({ alg: 'HS256', kid: key.id }, { ...base, exp: String(inOneHour()) }, key.key)],
    ['aud array without ours', craftJwt({ alg: 'HS256', kid: key.id }, { ...base, aud: ['https://example.com/'] }, key.key)],
    ['kid with path chars', craftJwt({ alg: 'HS256', kid: `../${key.id}` }, base, key.key)],
    ['kid as object', craftJwt({ alg: 'HS256', kid: { id: key.id } }, base, key.key)],
    ['crit header', craftJwt({ alg: 'HS256', kid: key.id, crit: ['x'] }, base, key.key)],
    ['payload swapped, old signature', `${h}.${b64(JSON.stringify({ ...base, act: { sub: 'admin' } }))}.${s}`],
    ['signature stripped', `${h}.${p}.`],
    ['padding in segments', `${h}=.${p}.${s}`],
    ['four segments', `${good}.x`],
    ['payload is an array', `${h}.${b64('[1]')}.${s}`],
    // 32 bytes take 43 characters: the last one carries 2 unused bits, which decoding would ignore.
    ['signature differing only in unused bits', `${h}.${p}.${s.slice(0, -1)}${ALPHABET[ALPHABET.indexOf(s.at(-1) as string) ^ 1]}`],
  ];
  for (const [name, token] of cases) {
    const res = await call(node.url, 'GET', '/machines', { token });
    t.equal(res.status, 403, `${name}: ${res.status} ${res.text.slice(0, 80)}`);
  }
  const big = craftJwt({ alg: 'HS256', kid: key.id }, { ...base, pad: 'x'.repeat(200_000) }, key.key);
  const res = await call(node.url, 'GET', '/machines', { token: big }).catch((e: Error) => ({ status: -1, text: e.message }));
  t.not(res.status, 200, 'a huge token is not accepted by default');
  t.equal((await call(node.url, 'GET', '/health')).status, 200, 'and the node is fine');
});

t.test('a key of org A cannot act in org B, whatever header it sends', async (t) => {
  const res = await call(node.url, 'GET', '/machines', { token: good, headers: { 'x-statebacked-org-id': orgB } });
  t.not(res.status, 200);
  const impersonate = await call(node.url, 'GET', '/machines', { token: good, headers: { 'x-statebacked-act': '{"sub":"x"}' } });
  t.equal(impersonate.status, 403, 'x-statebacked-act needs org.keys.write');
});

t.test('upload tokens: wrong kind, wrong machine, tampering, multipart abuse, gzip bombs', async (t) => {
  for (const m of ['m1', 'm2'])
    t.ok([200, 201, 204].includes((await call(node.url, 'POST', '/machines', { token: good, body: { slug: m } })).status), `create ${m}`);
  const prov = (await call(node.url, 'POST', '/machines/m1/v', { token: good })).body as {
    machineVersionId: string;
    codeUploadFields: { token: string };
  };
  const upload = prov.codeUploadFields.token;

  const form = (fields: [string, string][], file?: Buffer, boundary = 'BOUNDARY') => {
    const parts = fields.map(([n, v]) => `--${boundary}\r\ncontent-disposition: form-data; name="${n}"\r\n\r\n${v}\r\n`);
    const head = Buffer.from(
      parts.join('') +
        (file
          ? `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="b.js"\r\ncontent-type: application/javascript\r\n\r\n`
          : ''),
    );
    return Buffer.concat([head, file ?? Buffer.alloc(0), Buffer.from(`${file ? '\r\n' : ''}--${boundary}--\r\n`)]);
  };
  const post = (body: Buffer, contentType = 'multipart/form-data; boundary=BOUNDARY') =>
    call(node.url, 'POST', '/uploads/code', { rawBody: body, headers: { 'content-type': contentType } });
  const code = Buffer.from('export default 1;');

  t.equal((await post(form([['token', prov.machineVersionId]], code))).status, 400, 'a signed version id is not an upload token');
  t.equal(
    (await post(form([['token', upload.slice(0, -2) + (upload.endsWith('A') ? 'BB' : 'AA')]], code))).status,
    403,
    'a tampered token',
  );
  t.equal(
    (
      await post(
        form(
          [
            ['token', upload],
            ['token', upload],
          ],
          code,
        ),
      )
    ).status,
    400,
    'a repeated token field',
  );
  t.equal((await post(form([['token', upload]], code), 'multipart/form-data')).status, 400, 'no boundary');
  t.equal(
    (
      await post(
        form(
          Array.from({ length: 100 }, (_, i) => [`f${i}`, 'v'] as [string, string]),
          code,
        ),
      )
    ).status,
    400,
    'many parts',
  );
  t.equal(
    (
      await post(
        form(
          [
            ['token', upload],
            ['x'.repeat(100_000), 'v'],
          ],
          code,
        ),
      )
    ).status,
    400,
    'a huge field name',
  );
  // Cut off inside the file part (no credential needed): a 400, and the node still answers.
  const cut = await post(Buffer.from('--BOUNDARY\r\nContent-Disposition: form-data; name="file"; filename="a.js"\r\n\r\nabc'));
  t.equal(cut.status, 400, `a body cut off inside its file part: ${cut.text.slice(0, 120)}`);
  const cutLate = form([['token', upload]], code);
  t.equal((await post(cutLate.subarray(0, cutLate.length - 20))).status, 400, 'an upload cut off after its token');
  t.equal((await call(node.url, 'GET', '/health')).status, 200, 'the node is still up');
  const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024, 0x20));
  t.equal(
    (
      await post(
        form(
          [
            ['token', upload],
            ['content-encoding', 'gzip'],
          ],
          bomb,
        ),
      )
    ).status,
    413,
    'a gzip bomb',
  );
  t.equal(
    (
      await post(
        form(
          [
            ['token', upload],
            ['content-encoding', 'gzip'],
          ],
          gzipSync(gzipSync(Buffer.alloc(20 * 1024 * 1024, 0x20))),
        ),
      )
    ).status,
    400,
    'nested gzip is not unpacked twice',
  );

  // a version id issued for m1 cannot finalize a version of m2
  t.equal(
    (
      await post(
        form(
          [['token', upload]],
          Buffer.from(
            "import { createMachine } from 'npm:xstate'; export default createMachine({ id: 'x', initial: 'a', states: { a: {} } }); export function allowRead(){return true} export function allowWrite(){return true}",
          ),
        ),
      )
    ).status,
    204,
  );
  const cross = await call(node.url, 'PUT', `/machines/m2/v/${prov.machineVersionId}`, { token: good, body: { makeCurrent: true } });
  t.equal(cross.status, 400, `cross-machine finalize: ${cross.text.slice(0, 100)}`);
  const ok = await call(node.url, 'PUT', `/machines/m1/v/${prov.machineVersionId}`, { token: good, body: { makeCurrent: true } });
  t.equal(ok.status, 200);
  t.equal((await call(node.url, 'GET', '/health')).status, 200);
});

t.test('ids with encoded separators never reach another record', async (t) => {
  for (const path of [
    '/machines/m1%2F..%2Fm2',
    '/machines/m1/i/a%2Fb',
    '/machines/%2E%2E/i/x',
    '/machines/m1/i/%00',
    '/machines/m1/i/%E0%A4%A',
  ]) {
    const res = await call(node.url, 'GET', path, { token: good });
    t.ok(res.status >= 400 && res.status < 500, `${path}: ${res.status}`);
  }
});
