import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import WebSocket from 'ws';
import { realtimeMachine } from './fixtures/realtime-machines.js';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { startClusterNodes, natsMissing, startNats } from './helpers/nats.js';
import { onlyEmbedded, startNode } from './helpers/node-process.js';
import { LatencyHistogram } from '../src/bin/latency-histogram.js';

/** GET /metrics: Prometheus's text format, counters that move with the traffic, the operator credential or --metrics-public. */

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * Prometheus's text exposition format (0.0.4), strictly enough to fail on what a scraper would refuse:
 * `# HELP` / `# TYPE` lines, then `name{label="value",...} number` samples, label values escaped.
 */
const parseExposition = (text: string): { samples: Sample[]; types: Map<string, string> } => {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const comment = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (comment) {
      if (comment[1] === 'TYPE') types.set(comment[2] as string, comment[3] as string);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    const labelText = sample[2] ?? '';
    const labelPattern = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y;
    for (let at = 0; at < labelText.length;) {
      labelPattern.lastIndex = at;
      const label = labelPattern.exec(labelText);
      if (!label) throw new Error(`bad labels in: ${line}`);
      labels[label[1] as string] = (label[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      at = labelPattern.lastIndex;
    }
    // (Go's ParseFloat, which Prometheus reads values with, takes NaN and Inf in any case: prom-client writes `Nan`)
    const text = (sample[3] as string).toLowerCase();
    const value = text === '+inf' || text === 'inf' ? Infinity : text === '-inf' ? -Infinity : Number(text);
    if (Number.isNaN(value) && text !== 'nan') throw new Error(`bad value in: ${line}`);
    samples.push({ name: sample[1] as string, labels, value });
  }
  return { samples, types };
};

/** The sum of the samples named `name` whose labels include `labels`. */
const valueOf = (samples: Sample[], name: string, labels: Record<string, string> = {}): number =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

const scrape = async (url: string, token?: string) => {
  const res = await call(url, 'GET', '/metrics', token === undefined ? {} : { token });
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}: ${res.text}`);
  return { ...parseExposition(res.text), contentType: res.headers['content-type'] };
};

const ADMIN = 'metrics-admin';
const REQUESTS = 'statehold_http_request_duration_seconds_count';

t.test('GET /metrics counts the traffic, needs the operator credential', onlyEmbedded('counts one node'), async (t) => {
  const node = await startNode({ args: ['--admin-key', ADMIN], generatedAdminKey: true });
  t.teardown(() => node.stop());

  const refused = await call(node.url, 'GET', '/metrics');
  t.equal(refused.status, 403, 'no credential: 403');
  t.equal(refused.body?.code, 'unauthorized', "with the API's error body");
  t.type(refused.body?.error, 'string');
  t.equal((await call(node.url, 'GET', '/metrics', { token: 'wrong' })).status, 403, 'a wrong bearer: 403');

  const operator = new StateBackedClient(ADMIN, { apiHost: node.url, WebSocket: WebSocket as any });
  await operator.machines.create('rt');
  await operator.machineVersions.create('rt', { clientInfo: 'v1', makeCurrent: true, code: realtimeMachine });
  const production = await operator.keys.create({ name: 'prod', use: 'production' });
  const { signToken } = await import('@statebacked/token');
  const keyToken = await signToken(
    { stateBackedKeyId: production.id, stateBackedSecretKey: production.key },
    { sub: 'someone' },
    { expires: { in: '1h' } },
  );
  const byKey = await call(node.url, 'GET', '/metrics', { token: keyToken });
  t.equal(byKey.status, 403, "a key's token is not the operator's: 403");
  t.equal(byKey.body?.code, 'missing-user');

  const before = await scrape(node.url, ADMIN);
  t.match(before.contentType, /^text\/plain; version=0\.0\.4/, "Prometheus's text format");
  t.equal(before.types.get('statehold_http_request_duration_seconds'), 'histogram');
  t.equal(before.types.get('statehold_events_committed_total'), 'counter');
  t.equal(before.types.get('statehold_websocket_connections'), 'gauge');
  t.ok(valueOf(before.samples, 'statehold_lmdb_bytes') > 0, "LMDB's size");
  t.ok(valueOf(before.samples, 'statehold_wal_bytes') > 0, "the write-ahead log's size");
  t.ok(valueOf(before.samples, 'process_resident_memory_bytes') > 0, "the process's own metrics");

  // Traffic: 3 instances, 5 events, a 404, a websocket subscription.
  for (const slug of ['a', 'b', 'c']) await operator.machineInstances.create('rt', { slug });
  for (let i = 0; i < 5; i++) await operator.machineInstances.sendEvent('rt', ['a', 'b', 'c'][i % 3] as string, { event: 'INC' });
  t.equal((await call(node.url, 'GET', '/no/such/path', { token: ADMIN })).status, 404);
  const updates: unknown[] = [];
  const unsubscribe = operator.machineInstances.subscribe('rt', 'a', (update) => updates.push(update));
  await eventually(() => updates.length > 0, { message: 'the subscription got its first state' });

  const after = await eventually(
    async () => {
      const scraped = await scrape(node.url, ADMIN);
      return valueOf(scraped.samples, 'statehold_websocket_subscriptions') === 1 ? scraped : undefined;
    },
    { message: 'the subscription is counted' },
  );
  const moved = (name: string, labels: Record<string, string> = {}) =>
    valueOf(after.samples, name, labels) - valueOf(before.samples, name, labels);
  const events = { method: 'POST', route: '/machines/:machine/i/:instance/events', status: '200' };
  t.equal(moved(REQUESTS, events), 5, 'the 5 events, by their route pattern and status');
  t.equal(moved(REQUESTS, { method: 'POST', route: '/machines/:machine', status: '200' }), 3, 'the 3 creates');
  t.equal(moved(REQUESTS, { route: '(unmatched)', status: '404' }), 1, 'the 404, under no route');
  t.equal(moved(REQUESTS, { route: '/metrics', status: '200' }), 1, 'the scrape before (this one is counted once answered)');
  t.notOk(
    after.samples.some((s) => s.labels.route?.includes('/rt/') || s.labels.route?.includes('/i/a')),
    'no raw path as a label',
  );
  t.ok(moved('statehold_events_committed_total') >= 8, 'events committed: 3 creates and 5 events at least');
  t.ok(moved('statehold_commit_duration_seconds_count') >= 8, 'each commit timed');
  t.ok(valueOf(after.samples, 'statehold_sandbox_call_duration_seconds_count', { worker: 'main' }) > 0, 'sandbox calls timed');
  t.equal(valueOf(after.samples, 'statehold_actors', { state: 'live' }), 3, 'the 3 instances are live');
  t.equal(valueOf(after.samples, 'statehold_actors', { state: 'resting' }), 0);
  t.equal(valueOf(after.samples, 'statehold_websocket_connections'), 1, 'one websocket');
  t.equal(valueOf(after.samples, 'statehold_timers_pending'), 0);
  t.equal(valueOf(after.samples, 'statehold_outbox_depth'), 0);

  // A histogram's buckets add up: the +Inf bucket is the count.
  t.equal(
    valueOf(after.samples, 'statehold_http_request_duration_seconds_bucket', { ...events, le: '+Inf' }),
    valueOf(after.samples, REQUESTS, events),
  );

  unsubscribe();
  await eventually(async () => valueOf((await scrape(node.url, ADMIN)).samples, 'statehold_websocket_connections') === 0, {
    message: 'the closed websocket is no longer counted',
  });
});

t.test('--metrics-public: GET /metrics needs no credential', onlyEmbedded('one node'), async (t) => {
  const node = await startNode({ args: ['--metrics-public'] });
  t.teardown(() => node.stop());
  const scraped = await scrape(node.url);
  t.ok(scraped.samples.length > 0, 'answered without a credential');
  const other = await call(node.url, 'GET', '/stats');
  t.equal(other.status, 403, 'the other operator routes still need the credential');
});

t.test(
  'a cluster node adds its NATS connection, forwarded requests and ownership',
  { skip: natsMissing(), timeout: 120_000 },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const [first, second] = await startClusterNodes(t, nats, ['m1', 'm2'], { adminKey: ADMIN, args: ['--settle-timeout-ms', '500'] });
    if (!first || !second) throw new Error('two nodes');
    await eventually(async () => (await call(second.url, 'GET', '/health')).status === 200, { message: 'the second node is ready' });
    const client = new StateBackedClient(ADMIN, { apiHost: first.url });
    await client.machines.create('rt');
    await client.machineVersions.create('rt', { clientInfo: 'v1', makeCurrent: true, code: realtimeMachine });
    // Enough instances that both nodes own some: the ones the first node does not own are forwarded.
    for (let i = 0; i < 12; i++) await client.machineInstances.create('rt', { slug: `i${i}` });

    const scraped = await scrape(first.url, ADMIN);
    t.equal(valueOf(scraped.samples, 'statehold_nats_connection', { state: 'connected' }), 1, 'connected to NATS');
    t.equal(valueOf(scraped.samples, 'statehold_cluster_members'), 2);
    const owned = valueOf(scraped.samples, 'statehold_partitions_owned');
    t.ok(owned > 0 && owned < 64, `owns a share of the partitions (${owned})`);
    t.ok(
      valueOf(scraped.samples, 'statehold_forwarded_request_duration_seconds_count', { outcome: 'answered' }) > 0,
      'requests forwarded to the other node, timed',
    );
    t.ok(valueOf(scraped.samples, 'statehold_partition_moves_total') > 0, 'the partitions that moved when the second node joined');

    // A third node catches up its share, saying how far it is (at every look, 0: this catch-up is short).
    const [third] = await startClusterNodes(t, nats, ['m3'], {
      adminKey: ADMIN,
      args: ['--settle-timeout-ms', '500'],
      env: { STATEHOLD_PROGRESS_EVERY_MS: '0' },
    });
    const lines = third?.output().split('\n') ?? [];
    t.ok(
      lines.some((line) =>
        /catching up with the cluster's log: \d+ of \d+ log positions.*, \d+\/s, .*; \d+ of \d+ partitions ready/.test(line),
      ),
      'the catch-up says how far it is',
    );
    t.ok(
      lines.some((line) => /catching up with the cluster's log: done, \d+ log positions in /.test(line)),
      'and when it is done',
    );
  },
);

t.test('a latency histogram: a duration counts in the first bucket it fits, buckets written cumulative', (t) => {
  const histogram = new LatencyHistogram('x_seconds', 'durations\nof x', [0.1, 1]);
  const observe = histogram.series({ route: '/a/"b"\\c' });
  for (const seconds of [0.05, 0.1, 0.5, 2]) observe(seconds);
  histogram.series({ route: 'unused' });
  const { samples, types } = parseExposition(histogram.exposition());
  t.equal(types.get('x_seconds'), 'histogram');
  const route = '/a/"b"\\c';
  t.equal(valueOf(samples, 'x_seconds_bucket', { route, le: '0.1' }), 2, 'at the bound counts in it');
  t.equal(valueOf(samples, 'x_seconds_bucket', { route, le: '1' }), 3);
  t.equal(valueOf(samples, 'x_seconds_bucket', { route, le: '+Inf' }), 4);
  t.equal(valueOf(samples, 'x_seconds_count', { route }), 4);
  t.equal(valueOf(samples, 'x_seconds_sum', { route }), 2.65);
  t.equal(valueOf(samples, 'x_seconds_count', { route: 'unused' }), 0, 'a series made and not used is written with zeros');
  t.end();
});
