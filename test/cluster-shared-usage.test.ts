import t from 'tap';
import { SharedUsage, type UsageBatch, type UsageCounts } from '../src/store/jetstream/shared-usage.js';

/** Usage counts on their way to the cluster's META log, through an outage of the log. */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const batch = (transitions: number): UsageCounts => ({ orgId: 'org_a', usage: { transitions, reads: 0 }, machine: 'm', atMs: 0 });

t.test('batches the log does not take are held and sent again, in order; an outage is logged once', async (t) => {
  let down = true;
  const stored: number[] = [];
  let attempts = 0;
  const lines: string[] = [];
  const usage = new SharedUsage({
    submit: async (b) => {
      attempts++;
      if (down) throw new Error('jetstream is not enabled');
      stored.push(b.usage.transitions);
    },
    log: (level, message) => lines.push(`${level}: ${message}`),
    retryMs: 20,
    maxRetryMs: 40,
  });
  for (let i = 1; i <= 5; i++) await usage.add(batch(i));
  t.equal(usage.pending, 5, 'every batch held while the log is down');
  await sleep(150);
  t.equal(stored.length, 0);
  down = false;
  for (let i = 0; i < 50 && usage.pending > 0; i++) await sleep(20);
  t.equal(usage.pending, 0, 'all sent once the log takes them');
  t.same(stored, [1, 2, 3, 4, 5], 'each once, in order: nothing lost');
  t.ok(attempts > 5, 'retried');
  t.equal(lines.filter((line) => line.startsWith('warn')).length, 1, 'the outage is logged once');
  t.match(lines.at(-1), /^info: usage recorded in the cluster's log again/, 'and its end');
  await usage.add(batch(6));
  t.equal(stored.length, 6, 'later batches go straight through');
  usage.stop();
});

t.test('an outage is logged once though submits sent during it fail after the held ones went through', async (t) => {
  // The log is slow to fail (a request times out): three submits are under way when it goes down, and
  // fail one after another, the last after the first held batch was already sent again.
  const failAfter = [10, 60, 200];
  let down = true;
  const stored: number[] = [];
  const lines: string[] = [];
  const usage = new SharedUsage({
    submit: async (b) => {
      if (down) {
        const wait = failAfter.shift();
        if (wait !== undefined) {
          await sleep(wait);
          throw new Error('timeout');
        }
        throw new Error('jetstream is not enabled');
      }
      stored.push(b.usage.transitions);
    },
    log: (level, message) => lines.push(`${level}: ${message}`),
    retryMs: 20,
    maxRetryMs: 20,
  });
  const adds = [1, 2, 3].map((n) => usage.add(batch(n)));
  setTimeout(() => (down = false), 40);
  await Promise.all(adds);
  for (let i = 0; i < 50 && usage.pending > 0; i++) await sleep(20);
  t.same(stored.sort(), [1, 2, 3], 'every batch recorded once');
  t.same(
    lines.map((line) => line.split(':')[0]),
    ['warn', 'info'],
    'one line when it began, one when it ended',
  );
  usage.stop();
});

t.test("each batch carries its run's totals so far, by org, month and machine", async (t) => {
  const sent: UsageBatch[] = [];
  const usage = new SharedUsage({ submit: async (b) => void sent.push(b), log: () => undefined });
  const november = Date.UTC(2026, 10, 30, 23, 59);
  const december = Date.UTC(2026, 11, 1, 0, 1);
  const counts = (orgId: string, machine: string, transitions: number, atMs = november) => ({
    orgId,
    machine,
    atMs,
    usage: { transitions, reads: 1 },
  });
  await usage.add(counts('org_a', 'm', 3));
  await usage.add(counts('org_a', 'm', 4));
  await usage.add(counts('org_a', 'n', 5));
  await usage.add(counts('org_b', 'm', 6));
  await usage.add(counts('org_a', 'm', 2, december));
  await usage.add(counts('org_a', 'm', 1));
  t.same(
    sent.map((b) => [b.orgId, b.machine, b.usage.transitions, b.totals]),
    [
      ['org_a', 'm', 3, { transitions: 3, reads: 1 }],
      ['org_a', 'm', 4, { transitions: 7, reads: 2 }],
      ['org_a', 'n', 5, { transitions: 5, reads: 1 }],
      ['org_b', 'm', 6, { transitions: 6, reads: 1 }],
      ['org_a', 'm', 2, { transitions: 2, reads: 1 }],
      ['org_a', 'm', 1, { transitions: 8, reads: 3 }],
    ],
    'the totals go on within a month (a late batch of the month before included), and start again in a new one',
  );
  t.ok(sent.every((b) => b.run === usage.run) && typeof usage.run === 'string' && usage.run.length > 0, 'all under this run');
  t.not(new SharedUsage({ submit: async () => undefined, log: () => undefined }).run, usage.run, 'another run, another id');
  usage.stop();
});

t.test('the totals of the last batch of an org, month and machine are sent once more, with nothing to add', async (t) => {
  const sent: UsageBatch[] = [];
  const usage = new SharedUsage({ submit: async (b) => void sent.push(b), log: () => undefined, echoMs: 40 });
  t.teardown(() => usage.stop());
  const atMs = Date.UTC(2026, 10, 15);
  await usage.add({ orgId: 'org_a', machine: 'm', atMs, usage: { transitions: 2, reads: 0 } });
  await usage.add({ orgId: 'org_a', machine: 'm', atMs, usage: { transitions: 3, reads: 1 } });
  await usage.add({ orgId: 'org_a', machine: 'n', atMs, usage: { transitions: 1, reads: 0 } });
  await sleep(150);
  t.same(
    sent.map((b) => [b.machine, b.usage, b.totals]),
    [
      ['m', { transitions: 2, reads: 0 }, { transitions: 2, reads: 0 }],
      ['m', { transitions: 3, reads: 1 }, { transitions: 5, reads: 1 }],
      ['n', { transitions: 1, reads: 0 }, { transitions: 1, reads: 0 }],
      ['m', { transitions: 0, reads: 0 }, { transitions: 5, reads: 1 }],
      ['n', { transitions: 0, reads: 0 }, { transitions: 1, reads: 0 }],
    ],
    "each key's latest totals once more, after the quiet time, and only once",
  );
});
