/**
 * Egress policy bypass attempts (regression tests; all expected to pass): literal forms, IPv6
 * embeddings, names resolving to private ranges, allow-list edge cases and redirects into private
 * ranges, through the policy functions and through hostFetch against servers on 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { destinationOf, parseAllowList, resolveDestination, type Lookup } from '../src/sandbox/egress-policy.js';
import { hostFetch, pinnedLookup } from '../src/sandbox/host-fetch.js';

const refusedUrl = async (url: string, lookup?: Lookup, allow: string[] = []): Promise<string | undefined> => {
  try {
    const dest = destinationOf(new URL(url));
    await resolveDestination(
      dest,
      parseAllowList(allow),
      lookup ??
        (async () => {
          throw Object.assign(new Error('no dns in tests'), { code: 'ENOTFOUND' });
        }),
    );
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
};

t.test('literal and encoded forms of internal addresses are refused', async (t) => {
  const urls = [
    'http://127.0.0.1/',
    'http://127.1/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://0x7F.0.0.1/',
    'http://0177.0.0.01/',
    'http://127.0.0.1./',
    'http://[::1]/',
    'http://[0:0:0:0:0:0:0:1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[::127.0.0.1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[64:ff9b::a9fe:a9fe]/',
    'http://[2002:7f00:1::]/',
    'http://[2002:a9fe:a9fe::1]/',
    'http://[::ffff:0:7f00:1]/',
    'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
    'http://[fe80::1]/',
    'http://[fd00:ec2::254]/',
    'http://[fc00::1]/',
    'http://[fec0::1]/',
    'http://[ff02::1]/',
    'http://[::]/',
    'http://0.0.0.0/',
    'http://0/',
    'http://0.0.0.0:8080/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::ffff:169.254.169.254]/',
    'http://0xa9fea9fe/',
    'http://2852039166/',
    'http://10.0.0.1/',
    'http://172.16.0.1/',
    'http://192.168.0.1/',
    'http://100.64.0.1/',
    'http://168.63.129.16/',
    'http://100.100.100.200/',
    'http://255.255.255.255/',
    'http://224.0.0.1/',
    'http://198.18.0.1/',
    'http://192.0.0.1/',
    'https://127.0.0.1:443/',
    'http://evil@127.0.0.1/',
    'http://127.0.0.1:80@example.com/',
    'http://user:pw@example.com/',
    'http://example.com:1@127.0.0.1/',
    'ftp://example.com/',
    'file:///etc/passwd',
    'data:text/plain,hi',
    'ws://example.com/',
    'gopher://127.0.0.1:6379/',
    'http://example.0x7f/',
    'http://127.0.0.1.0x0/',
  ];
  for (const url of urls) t.not(await refusedUrl(url), undefined, url);
});

t.test('names resolving to internal addresses are refused, even when only one of their addresses is', async (t) => {
  const answers: [string, { address: string; family: 4 | 6 }[]][] = [
    ['loopback', [{ address: '127.0.0.1', family: 4 }]],
    [
      'mixed',
      [
        { address: '93.184.216.34', family: 4 },
        { address: '10.0.0.5', family: 4 },
      ],
    ],
    ['v6 mapped', [{ address: '::ffff:10.0.0.5', family: 6 }]],
    ['v6 loopback', [{ address: '0:0:0:0:0:0:0:1', family: 6 }]],
    ['metadata v6', [{ address: 'fd00:ec2:0:0:0:0:0:254', family: 6 }]],
    ['not an address', [{ address: 'localhost', family: 4 }]],
    ['empty', []],
  ];
  for (const [name, list] of answers) {
    t.not(await refusedUrl('http://rebind.example/', async () => list), undefined, name);
    t.not(await refusedUrl('http://REBIND.example./', async () => list), undefined, `${name} (upper case, trailing dot)`);
  }
  t.equal(
    await refusedUrl('http://public.example/', async () => [{ address: '93.184.216.34', family: 4 }]),
    undefined,
    'a public name passes',
  );
});

t.test('allow-list entries open exactly what they name', async (t) => {
  const loop = async () => [{ address: '127.0.0.1', family: 4 as const }];
  t.equal(await refusedUrl('http://127.0.0.1:8080/', undefined, ['127.0.0.1:8080']), undefined);
  t.not(await refusedUrl('http://127.0.0.1:8081/', undefined, ['127.0.0.1:8080']), undefined, 'another port');
  t.not(await refusedUrl('http://127.0.0.2:8080/', undefined, ['127.0.0.1:8080']), undefined, 'another loopback address');
  t.not(await refusedUrl('http://[::1]:8080/', undefined, ['127.0.0.1:8080']), undefined, 'the v6 loopback');
  t.not(await refusedUrl('http://[::ffff:127.0.0.1]:8081/', undefined, ['127.0.0.1:8080']), undefined, 'a mapped form on another port');
  t.not(await refusedUrl('http://allowed.test.evil.example/', loop, ['allowed.test']), undefined, 'a suffix-extended name');
  t.not(await refusedUrl('http://evil-allowed.test/', loop, ['allowed.test']), undefined, 'a prefix-extended name');
  t.throws(() => parseAllowList(['*.example.com']));
  t.throws(() => parseAllowList(['127.0.0.1:0']));
  t.throws(() => parseAllowList(['fe80::1%eth0']));
});

t.test('pinned lookup answers only checked addresses', async (t) => {
  const lookup = pinnedLookup([{ address: '93.184.216.34', family: 4 }]);
  const all = await new Promise<unknown>((resolve) => lookup('localhost', { all: true }, (_e: unknown, a: unknown) => resolve(a)));
  t.same(all, [{ address: '93.184.216.34', family: 4 }]);
  const v6 = await new Promise<unknown>((resolve) => lookup('localhost', { family: 6 }, (e: unknown) => resolve(e)));
  t.ok(v6 instanceof Error, 'no unchecked v6 fallback');
});

const listen = (handler: Parameters<typeof createServer>[1]): Promise<Server> =>
  new Promise((resolve) => {
    const server = createServer(handler);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
const portOf = (s: Server) => (s.address() as AddressInfo).port;

t.test('hostFetch: redirects into internal ranges are refused at every hop', async (t) => {
  let internalHits = 0;
  const internal = await listen((_req, res) => {
    internalHits++;
    res.end('secret');
  });
  const target = `http://127.0.0.1:${portOf(internal)}/secret`;
  const locations = [
    target,
    `http://[::ffff:127.0.0.1]:${portOf(internal)}/`,
    `http://2130706433:${portOf(internal)}/`,
    `http://localhost:${portOf(internal)}/`,
    `//127.0.0.1:${portOf(internal)}/`,
  ];
  let i = 0;
  const redirector = await listen((_req, res) => {
    res.writeHead(i % 2 === 0 ? 302 : 307, { location: locations[i++ % locations.length] as string });
    res.end();
  });
  t.teardown(() => {
    internal.close();
    redirector.close();
  });
  const allow = parseAllowList([`allowed.test:${portOf(redirector)}`]);
  const lookup: Lookup = async (host) =>
    host === 'allowed.test' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
  for (let n = 0; n < locations.length; n++) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 5000);
    await t.rejects(
      hostFetch(
        { url: `http://allowed.test:${portOf(redirector)}/start`, method: 'GET', headers: [], body: undefined, redirect: 'follow' },
        { allow, maxResponseBytes: 1024, lookup },
        controller.signal,
      ),
      { name: 'FetchFailure', message: /loopback|not in the allow-list|resolve/ },
      `redirect to ${locations[n]}`,
    );
    clearTimeout(timer);
  }
  t.equal(internalHits, 0, 'the internal server was never reached');
});
