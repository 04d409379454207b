import t from 'tap';
import { clientAddressGroup } from '../src/domain/client-address.js';

t.test('per-client limits count IPv4 addresses whole and IPv6 ones by their /64', async (t) => {
  t.equal(clientAddressGroup('203.0.113.7'), '203.0.113.7');
  t.equal(
    clientAddressGroup('0000:0000:0000:0000:0000:ffff:7f00:0001'),
    '127.0.0.1',
    "uWS's text for an IPv4 client on a dual-stack socket",
  );
  t.equal(clientAddressGroup('::ffff:10.1.2.3'), '10.1.2.3');
  const group = clientAddressGroup('2001:db8:1:2:3:4:5:6');
  t.equal(group, '2001:db8:1:2::/64');
  for (const other of ['2001:db8:1:2::9', '[2001:DB8:1:2::ffff]', '2001:0db8:0001:0002:ffff:ffff:ffff:ffff'])
    t.equal(clientAddressGroup(other), group, other);
  t.not(clientAddressGroup('2001:db8:1:3::1'), group, 'the next /64 is another client');
  t.equal(clientAddressGroup('not an address'), 'not an address', 'anything else counts as itself');
  t.equal(clientAddressGroup('1:2:3:4:5:6:7:8:9'), '1:2:3:4:5:6:7:8:9');
});
