/**
 * A stream follower that cannot make a consumer still delivers the stream's entries, in order, read one
 * by one from the stream: after a nats-server was lost, making one timed out again and again for seconds
 * while the stream itself answered (cluster/README.md, What is left, 14). Here a real nats-server
 * refuses the follower's user every consumer API subject, so only the reads can deliver.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import t, { type Test } from 'tap';
import { freePort, natsServerAvailable } from '../cluster/nats-servers.mjs';
import { type FollowedMessage, StreamFollower } from '../src/store/jetstream/stream-follower.js';
import { eventually } from './helpers/eventually.js';

if (!natsServerAvailable()) {
  t.plan(0, 'nats-server is not installed (apt-get install nats-server)');
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'statehold-follower-'));
const port = await freePort();
writeFileSync(
  join(dir, 'server.conf'),
  `listen: 127.0.0.1:${port}
jetstream { store_dir: "${join(dir, 'store')}" }
authorization {
  users: [
    { user: writer, password: writer }
    { user: follower, password: follower, permissions: { publish: { allow: [">"], deny: ["$JS.API.CONSUMER.>"] } } }
  ]
}
`,
);
const server = spawn('nats-server', ['-c', join(dir, 'server.conf')], { stdio: 'ignore' });
t.teardown(() => {
  server.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});
const connectAs = (user: string) =>
  eventually(() => connect({ servers: `127.0.0.1:${port}`, user, pass: user }).catch(() => undefined), {
    message: 'nats-server did not start',
  });

const writer = await connectAs('writer');
const reader = await connectAs('follower');
t.teardown(async () => {
  await writer.close();
  await reader.close();
});
await (await jetstreamManager(writer)).streams.add({ name: 'FOLLOWED', subjects: ['followed.>'] });
const js = jetstream(writer);
for (let i = 1; i <= 30; i++) await js.publish(`followed.${i % 3}.x`, JSON.stringify({ i }));

/**
 * A started follower, as the follower's user, of `filter` from sequence `from`: what it handed on (the
 * sequence and the entry's `i`) and what it reported, in order; stopped when the test ends.
 */
const follow = async (t: Test, filter: string, from: number, timeout: number) => {
  const seen: Array<{ seq: number; i: unknown }> = [];
  const errors: string[] = [];
  let next = from;
  const follower = new StreamFollower({
    js: jetstream(reader, { timeout }),
    stream: 'FOLLOWED',
    filter,
    next: () => next,
    handle: async (message: FollowedMessage) => {
      seen.push({ seq: message.seq, i: message.json<{ i: unknown }>().i });
      next = message.seq + 1;
    },
    onError: (message) => errors.push(message),
  });
  t.teardown(() => follower.stop());
  await follower.start();
  return { follower, seen, errors };
};

t.test('with no consumer to be had, the entries of its filter are read from the stream, in order', async (t) => {
  const { seen, errors } = await follow(t, 'followed.1.>', 5, 500);
  // Entries on followed.1: i = 1, 4, …, 28 at sequences 1, 4, …, 28; from sequence 5 on: 7, 10, …, 28.
  const expected = Array.from({ length: 8 }, (_, k) => ({ seq: 7 + 3 * k, i: 7 + 3 * k }));
  await eventually(() => seen.length >= expected.length, { message: `read ${JSON.stringify(seen)}` });
  t.same(seen, expected, 'every entry of the filter from next() on, once, in stream order');
  t.match(errors[0], /could not follow FOLLOWED yet; reading its entries meanwhile/, 'the missing consumer is reported');

  // What is appended later is read too, once the follower's next try to make a consumer failed again.
  await js.publish('followed.1.x', JSON.stringify({ i: 31 }));
  await js.publish('followed.2.x', JSON.stringify({ i: 32 }));
  await eventually(() => seen.length > expected.length, { message: 'the entry appended later was not read' });
  t.same(seen.at(-1), { seq: 31, i: 31 });
  t.equal(seen.length, expected.length + 1, 'and nothing of another filter');
});

t.test('an entry someone waits for is read at once (readSoon), not after the pause before the next try', async (t) => {
  const last = (await (await jetstreamManager(writer)).streams.info('FOLLOWED')).state.last_seq;
  const { follower, seen, errors } = await follow(t, 'followed.0.>', last + 1, 300);
  // Each try to make a consumer fails, and the pause before the next doubles: after five, it is 4 s.
  await eventually(() => errors.filter((error) => /stopped following FOLLOWED/.test(error)).length >= 5, {
    timeoutMs: 20_000,
    message: `the follower did not fail five times: ${errors.join('; ')}`,
  });
  const { seq } = await js.publish('followed.0.x', JSON.stringify({ i: 'waited for' }));
  const asked = Date.now();
  follower.readSoon(seq);
  await eventually(() => seen.some((entry) => entry.seq === seq), { timeoutMs: 10_000, message: 'the entry waited for was not read' });
  const took = Date.now() - asked;
  t.ok(took < 1_500, `read ${took} ms after it was asked for (the pause before the next try is 4 s)`);
  t.same(
    seen.map((entry) => entry.seq),
    [seq],
    'that entry, once',
  );
});
