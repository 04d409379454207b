// Where an event's time goes inside the server, for `POST .../events` requests: loaded into the server
// with `BENCH_SERVER_NODE_ARGS="--import ./bench/probes/stages.mjs"` (from the repository root), it wraps
// a few methods of the built server (dist/) on their prototypes, the server's code unchanged, and when
// the server gets SIGTERM (the end of a scenario) writes what it saw to `STAGES_OUT` (default
// bench/results/stages-<pid>.json) and prints a summary on stdout (kept with BENCH_SERVER_STDOUT).
//
// An event's stages, by the times it passed these points:
//   handle  -> sandbox call    parsing, auth, routing, the instance's mailbox
//   sandbox call -> request     reaching the sandbox client (the version loaded, the actor live)
//   request -> received         the worker round trip: waiting for the batch to be sent, the worker's
//                               previous batches, its own batch (the worker answers a batch at once),
//                               the way back, and the main thread being free to read it
//   received -> answer          parsing the step result (the promise's continuation)
//   answer -> commit            building the head and the records
//   commit                      the durable commit; of it, `log` is the write-ahead log's frame
//   commit -> respond           usage, the answer's JSON, the write to the socket
// The bench guarantees one event in flight per instance, so the instance name identifies an event.
// Timestamps are `performance.now()` on the main thread. Also recorded: the main thread's GC pauses.
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const dist = (path) => import(join(repoRoot, 'dist', path));
const { HttpServer } = await dist('api/http-server.js');
const { SandboxClient } = await dist('sandbox/worker/sandbox-client.js');
const { RemoteVersion } = await dist('sandbox/worker/remote-version.js');
const { LmdbInstanceStore } = await dist('store/lmdb/lmdb-instance-store.js');
const { WalCommits } = await dist('store/lmdb/wal-commits.js');

const EVENT_PATH = /^\/machines\/[^/]+\/i\/([^/]+)\/events$/;
const inFlight = new Map(); // instance name -> marks
const finished = [];
const startedBy = new WeakMap(); // uWS response -> marks
const byRequestId = new Map(); // sandbox request id -> marks
const gcPauses = [];

const wrap = (proto, name, around) => {
  const original = proto[name];
  if (typeof original !== 'function') throw new Error(`stages probe: ${proto.constructor.name}.${name} is not a method any more`);
  proto[name] = around(original);
};

wrap(
  HttpServer.prototype,
  'handle',
  (original) =>
    function (res, req) {
      const match = req.getMethod() === 'post' || req.getMethod() === 'POST' ? EVENT_PATH.exec(req.getUrl()) : null;
      if (match) {
        const marks = { name: decodeURIComponent(match[1]), handle: performance.now() };
        inFlight.set(marks.name, marks);
        startedBy.set(res, marks);
      }
      return original.call(this, res, req);
    },
);

wrap(
  HttpServer.prototype,
  'respond',
  (original) =>
    function (res, state, ...rest) {
      const marks = startedBy.get(res);
      const result = original.call(this, res, state, ...rest);
      if (marks && marks.respond === undefined) {
        marks.respond = performance.now();
        if (inFlight.get(marks.name) === marks) inFlight.delete(marks.name);
        finished.push(marks);
      }
      return result;
    },
);

wrap(
  RemoteVersion.prototype,
  'sendAuthorized',
  (original) =>
    async function (key, caller, ...rest) {
      const marks = inFlight.get(caller?.machineInstanceName);
      if (marks) marks.sandboxCall = performance.now();
      const result = await original.call(this, key, caller, ...rest);
      if (marks) marks.answer = performance.now();
      return result;
    },
);

wrap(
  SandboxClient.prototype,
  'request',
  (original) =>
    function (request) {
      const marks = request.op === 'sendAuthorized' ? inFlight.get(request.caller?.machineInstanceName) : undefined;
      if (marks) {
        marks.request = performance.now();
        byRequestId.set(this.nextId, marks);
      }
      return original.call(this, request);
    },
);

wrap(
  SandboxClient.prototype,
  'received',
  (original) =>
    function (worker, message) {
      if (message.kind === 'response') {
        const marks = byRequestId.get(message.id);
        if (marks) {
          byRequestId.delete(message.id);
          marks.received = performance.now();
        }
      }
      return original.call(this, worker, message);
    },
);

wrap(
  LmdbInstanceStore.prototype,
  'commit',
  (original) =>
    async function (head, ...rest) {
      const marks = inFlight.get(head.name);
      if (marks) marks.commit = performance.now();
      try {
        return await original.call(this, head, ...rest);
      } finally {
        if (marks) marks.committed = performance.now();
      }
    },
);

wrap(
  WalCommits.prototype,
  'write',
  (original) =>
    async function (commit, ...rest) {
      const marks = inFlight.get(commit.head?.name);
      if (marks) marks.log = performance.now();
      try {
        return await original.call(this, commit, ...rest);
      } finally {
        if (marks) marks.logged = performance.now();
      }
    },
);

new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcPauses.push({ at: entry.startTime, ms: entry.duration, kind: entry.detail?.kind });
}).observe({ entryTypes: ['gc'] });

const STAGES = [
  ['before the sandbox', 'handle', 'sandboxCall'],
  ['to the sandbox client', 'sandboxCall', 'request'],
  ['worker round trip', 'request', 'received'],
  ['step result parsed', 'received', 'answer'],
  ['head and records built', 'answer', 'commit'],
  ['commit', 'commit', 'committed'],
  ['  of it the log frame', 'log', 'logged'],
  ['answered', 'committed', 'respond'],
  ['total', 'handle', 'respond'],
];

const quantile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * (sorted.length - 1)))];
const round = (x) => Math.round(x * 100) / 100;

const summarize = () => {
  // Every event that went through the usual path, less the warm-up's (`STAGES_SKIP`, by default the
  // bench's BENCH_WARMUP_EVENTS or its default 1,000; creating instances is not an event).
  const skip = Number(process.env.STAGES_SKIP ?? process.env.BENCH_WARMUP_EVENTS ?? 1000);
  const events = finished.filter((m) => m.sandboxCall !== undefined && m.received !== undefined && m.committed !== undefined).slice(skip);
  if (events.length === 0) return { events: 0 };
  const from = events[0].handle;
  const to = events.at(-1).respond;
  const totals = events.map((m) => m.respond - m.handle).sort((a, b) => a - b);
  const slowCut = quantile(totals, 0.98);
  const slow = events.filter((m) => m.respond - m.handle >= slowCut);
  const stages = {};
  for (const [label, a, b] of STAGES) {
    const spans = events
      .filter((m) => m[a] !== undefined && m[b] !== undefined)
      .map((m) => m[b] - m[a])
      .sort((x, y) => x - y);
    if (spans.length === 0) continue;
    const slowSpans = slow.filter((m) => m[a] !== undefined && m[b] !== undefined).map((m) => m[b] - m[a]);
    stages[label] = {
      p50: round(quantile(spans, 0.5)),
      p90: round(quantile(spans, 0.9)),
      p99: round(quantile(spans, 0.99)),
      mean: round(spans.reduce((s, x) => s + x, 0) / spans.length),
      meanInSlowest2pc: slowSpans.length ? round(slowSpans.reduce((s, x) => s + x, 0) / slowSpans.length) : null,
    };
  }
  const pauses = gcPauses.filter((g) => g.at >= from && g.at <= to);
  const pauseMs = pauses.map((g) => g.ms).sort((a, b) => a - b);
  return {
    events: events.length,
    windowMs: round(to - from),
    stages,
    mainThreadGc: {
      pauses: pauses.length,
      totalMs: round(pauseMs.reduce((s, x) => s + x, 0)),
      p50Ms: pauseMs.length ? round(quantile(pauseMs, 0.5)) : null,
      maxMs: pauseMs.length ? round(pauseMs.at(-1)) : null,
    },
  };
};

process.once('SIGTERM', () => {
  const summary = summarize();
  const out = process.env.STAGES_OUT ?? join(repoRoot, 'bench', 'results', `stages-${process.pid}.json`);
  writeFileSync(out, JSON.stringify(summary, null, 2));
  const lines = Object.entries(summary.stages ?? {}).map(
    ([label, s]) => `  ${label.padEnd(24)} p50 ${s.p50}  p90 ${s.p90}  p99 ${s.p99}  mean ${s.mean}  (slowest 2 %: ${s.meanInSlowest2pc})`,
  );
  process.stdout.write(`stages probe: ${summary.events} events, written to ${out}\n${lines.join('\n')}\n`);
});
