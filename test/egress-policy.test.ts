import t from 'tap';
import {
  canonicalHost,
  classifyAddress,
  destinationOf,
  parseAllowList,
  parseIPv6,
  resolveDestination,
  type Lookup,
} from '../src/sandbox/egress-policy.js';

t.test('address classification', async (t) => {
  const table: [string, string | undefined][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.3.4', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', undefined],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['100.64.0.1', 'shared (CGNAT)'],
    ['100.127.255.255', 'shared (CGNAT)'],
    ['100.128.0.1', undefined],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['2001:db8::1', 'documentation'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['[::ffff:169.254.169.254]', 'metadata'],
    ['::ffff:10.0.0.1', 'private'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::a00:1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['2001::1', 'reserved'],
    ['::ffff:8.8.8.8', undefined],
    ['8.8.8.8', undefined],
    ['1.1.1.1', undefined],
    ['93.184.216.34', undefined],
    ['2606:4700:4700::1111', undefined],
    ['2a00:1450:4001:82a::200e', undefined],
  ];
  for (const [address, expected] of table) t.equal(classifyAddress(address), expected, address);
  t.throws(() => classifyAddress('localhost'));
  t.throws(() => classifyAddress('127.1'), 'only canonical dotted quads are addresses');
});

t.test('IPv6 parsing', async (t) => {
  t.same(Array.from(parseIPv6('::ffff:1.2.3.4') ?? []), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
  t.equal(parseIPv6('1::2::3'), undefined);
  t.equal(parseIPv6('1:2:3:4:5:6:7:8:9'), undefined);
  t.equal(parseIPv6('fe80::1%eth0'), undefined);
  t.equal(canonicalHost('[0:0:0:0:0:0:0:1]'), '::1');
  t.equal(canonicalHost('Example.COM.'), 'example.com');
});

t.test('URL hosts: odd IPv4 literal forms are canonicalised by the WHATWG parser, then refused', async (t) => {
  for (const literal of ['2130706433', '0x7f.1', '0177.0.0.1', '127.1', '0x7f000001', '017700000001', '127.0.1']) {
    const dest = destinationOf(new URL(`http://${literal}/x`));
    t.equal(dest.host.startsWith('127.'), true, `${literal} → ${dest.host}`);
    await t.rejects(resolveDestination(dest, []), { message: /is a loopback address and not in the allow-list/ }, literal);
  }
  t.same(destinationOf(new URL('http://[::ffff:127.0.0.1]:81/')), { host: '::ffff:7f00:1', port: 81 });
  await t.rejects(resolveDestination(destinationOf(new URL('http://[::ffff:127.0.0.1]/')), []), { message: /loopback/ });
  t.throws(() => destinationOf(new URL('ftp://example.com/')), /only http: and https:/);
  t.throws(() => destinationOf(new URL('file:///etc/passwd')), /only http: and https:/);
  t.throws(() => destinationOf(new URL('http://u:p@example.com/')), /credentials/);
  t.same(destinationOf(new URL('https://Example.com/')), { host: 'example.com', port: 443 });
});

t.test('allow-list parsing', async (t) => {
  t.same(parseAllowList(['api.example.com', 'Example.org:8443', '127.0.0.1:8080', '[::1]:9000', '[::1]', ' ', '10.0.0.5']), [
    { host: 'api.example.com', port: undefined },
    { host: 'example.org', port: 8443 },
    { host: '127.0.0.1', port: 8080 },
    { host: '::1', port: 9000 },
    { host: '::1', port: undefined },
    { host: '10.0.0.5', port: undefined },
  ]);
  t.throws(() => parseAllowList(['host:0']), /port/);
  t.throws(() => parseAllowList(['host:99999']), /port/);
  t.same(parseAllowList(['::1']), [{ host: '::1', port: undefined }], 'a bare IPv6 address (no port) is unambiguous');
  t.throws(() => parseAllowList(['fe80::1::2']), /\[addr\]/);
  t.throws(() => parseAllowList(['http://x']), /./);
  t.throws(() => parseAllowList(['a b']), /not a host/);
});

t.test('resolution: every address is checked; the allow-list opens hosts and addresses', async (t) => {
  const dns: Record<string, string[]> = {
    'public.test': ['93.184.216.34', '2606:4700:4700::1111'],
    'mixed.test': ['93.184.216.34', '10.0.0.7'],
    'metadata.test': ['169.254.169.254'],
    'mapped.test': ['::ffff:192.168.0.1'],
    'internal.test': ['10.1.1.1'],
  };
  const lookup: Lookup = async (host) => {
    const list = dns[host];
    if (!list) throw Object.assign(new Error('nope'), { code: 'ENOTFOUND' });
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  const dest = (u: string) => destinationOf(new URL(u));
  t.same(await resolveDestination(dest('http://public.test/'), [], lookup), [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:4700:4700::1111', family: 6 },
  ]);
  await t.rejects(resolveDestination(dest('http://mixed.test/'), [], lookup), {
    message: 'destination mixed.test (10.0.0.7) is a private address and not in the allow-list',
  });
  await t.rejects(resolveDestination(dest('http://metadata.test/'), [], lookup), { message: /metadata address/ });
  await t.rejects(resolveDestination(dest('http://mapped.test/'), [], lookup), { message: /private address/ });
  await t.rejects(resolveDestination(dest('http://nowhere.test/'), [], lookup), { message: 'could not resolve nowhere.test (ENOTFOUND)' });
  await t.rejects(resolveDestination(dest('http://127.0.0.1:8080/'), [], lookup), {
    message: 'destination 127.0.0.1 is a loopback address and not in the allow-list',
  });

  const allow = parseAllowList(['internal.test', '127.0.0.1:8080', '[::1]']);
  t.same(await resolveDestination(dest('http://internal.test:1234/'), allow, lookup), [{ address: '10.1.1.1', family: 4 }]);
  t.same(await resolveDestination(dest('http://127.0.0.1:8080/'), allow, lookup), [{ address: '127.0.0.1', family: 4 }]);
  await t.rejects(resolveDestination(dest('http://127.0.0.1:8081/'), allow, lookup), { message: /loopback/ }, 'the port must match');
  t.same(await resolveDestination(dest('http://[::1]:5/'), allow, lookup), [{ address: '::1', family: 6 }]);
  await t.rejects(resolveDestination(dest('http://mixed.test/'), allow, lookup), { message: /private/ });
});
