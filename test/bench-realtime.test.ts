/** The realtime bench scenario's pure parts: spreading subscribers, matching receipts to answers, the summary, the verdict. */
import t from 'tap';
import { deliveryFigures, median, realtimeFailed, splitRanges, subscribersPerInstance, summarizeRounds } from '../bench/lib/realtime.mjs';

t.test('subscribers spread over instances (s mod K) and processes (contiguous ranges)', async (t) => {
  t.same(subscribersPerInstance(1000, 100), Array(100).fill(10));
  t.same(subscribersPerInstance(7, 3), [3, 2, 2]);
  t.same(splitRanges(1000, 2), [
    { from: 0, to: 500 },
    { from: 500, to: 1000 },
  ]);
  t.same(splitRanges(5, 1), [{ from: 0, to: 5 }]);
  t.same(
    splitRanges(2, 4),
    [
      { from: 0, to: 1 },
      { from: 1, to: 2 },
    ],
    'never more processes than subscribers',
  );
});

t.test('median of finite numbers', async (t) => {
  t.equal(median([3, 1, 2]), 2);
  t.equal(median([4, 1, 2, 3]), 2.5);
  t.equal(median([null, undefined, 5]), 5);
  t.equal(median([]), null);
});

t.test('receipts match answers by instance and ts; missed and unmatched are counted', async (t) => {
  // Two instances, two subscribers each (subscriber s watches instance s mod 2).
  const perInstance = [2, 2];
  const sent = { inst: [0, 1, 0], ts: [1000, 1000, 1005], at: [50, 51, 60] };
  const receipts = [
    // subscriber 0 (instance 0) got both of its instance's updates, subscriber 1 (instance 1) its one
    { sub: [0, 1, 0], ts: [1000, 1000, 1005], at: [52, 50, 61], wall: [1002, 1001, 1006] },
    // subscriber 2 (instance 0) missed ts 1005 and got one no answer carried (a warm-up event, say);
    // subscriber 3 (instance 1) got nothing
    { sub: [2, 2], ts: [1000, 990], at: [53, 40], wall: [1003, 990] },
  ];
  const d = deliveryFigures({ sent, receipts, perInstance, wallS: 2 });
  t.equal(d.events, 3);
  t.equal(d.expected, 6);
  t.equal(d.received, 4);
  t.equal(d.missed, 2);
  t.equal(d.unmatched, 1);
  t.equal(d.perSecond, 2);
  t.equal(d.delayMs.min, -1, 'an update may arrive before the answer');
  t.equal(d.delayMs.max, 3);
  t.equal(d.sinceCommitMs.max, 3);
});

const window = (throughput: number, p50: number, p99: number, cpu = 50) => ({
  throughput,
  statusCounts: { 200: 10 },
  latencyMs: { p50, p99 },
  server: { cpuPct: cpu, cpuUsPerEvent: { total: 1000 }, rssPeakMb: 300 },
});
const round = (n: number, subsP99: number, deliveryP99: number, missed = 0) => ({
  round: n,
  base: window(500, 5, 10),
  subs: window(495, 5, subsP99),
  connect: { opened: 10, failed: 0, firstFrames: 10 },
  delivery: {
    expected: 100,
    missed,
    unmatched: 0,
    perSecond: 5000,
    delayMs: { p50: 1, p99: deliveryP99, max: deliveryP99 * 2 },
    sinceCommitMs: { p99: 2 },
  },
  problems: { errorFrames: {}, unexpectedCloses: {}, socketErrors: {}, wrongInstance: 0, outOfOrder: 0, unparsable: 0 },
});

t.test('rounds: medians, the worst max, summed misses, ratios against the same run without subscribers', async (t) => {
  const s = summarizeRounds([round(1, 11, 4), round(2, 13, 6, 3), round(3, 12, 5)]);
  t.equal(s.rounds, 3);
  t.equal(s.subs.p99, 12);
  t.equal(s.ratio.p99, 1.2);
  t.equal(s.ratio.throughput, 0.99);
  t.equal(s.delivery.p99, 5);
  t.equal(s.delivery.max, 12);
  t.equal(s.delivery.missed, 3);
  t.equal(s.delivery.expected, 300);
});

t.test('failed: errors, non-200 answers, sockets that did not subscribe, error frames, count mismatches; not missed updates', async (t) => {
  const ok = { rounds: [round(1, 11, 4, 7)], checked: { mismatches: 0 } };
  t.equal(realtimeFailed(ok), false, 'missed updates are reported, not failed');
  t.equal(realtimeFailed({ ...ok, error: 'boom' }), true);
  t.equal(realtimeFailed({ rounds: [] }), true);
  t.equal(realtimeFailed({ ...ok, checked: { mismatches: 1 } }), true);
  const withStatus = round(1, 11, 4);
  (withStatus.subs.statusCounts as Record<string, number>)['503 unavailable'] = 1;
  t.equal(realtimeFailed({ rounds: [withStatus] }), true);
  const notSubscribed = round(1, 11, 4);
  notSubscribed.connect.firstFrames = 9;
  t.equal(realtimeFailed({ rounds: [notSubscribed] }), true);
  const errorFrame = round(1, 11, 4);
  (errorFrame.problems.errorFrames as Record<string, number>)['429 rate-limited'] = 1;
  t.equal(realtimeFailed({ rounds: [errorFrame] }), true);
});
