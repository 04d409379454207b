import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RuntimeMeters } from '../runtime/runtime-parts.js';

/** Latency buckets, in seconds: from a sub-millisecond commit to a settle that took its whole budget. */
const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type Read = () => number;

/**
 * A node's metrics (GET /metrics, Prometheus's text format), on a registry of its own. What the hot
 * path counts is O(1) there: a histogram child per route, method and status made once and kept, a
 * commit's and a sandbox call's time, a counter added to. Everything else (actors, timers, the outbox,
 * sockets, file sizes, a cluster's state) is read only when a scraper asks, from counts the node keeps
 * anyway.
 */
export class NodeMetrics {
  readonly registry = new Registry();
  private readonly requests: Histogram<'method' | 'route' | 'status'>;
  /** Children of `requests` by method, route and status: prom-client hashes label values on each observe otherwise. */
  private readonly requestChildren = new Map<string, Histogram.Internal<'method' | 'route' | 'status'>>();
  private readonly commits: Histogram;
  private readonly events: Counter;
  private readonly sandboxCalls: Histogram<'worker'>;
  private readonly restarts: Counter<'worker' | 'reason'>;

  constructor() {
    // (unprefixed, process_* and nodejs_*, as dashboards for Node.js services expect them)
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Histogram({
      name: 'statehold_http_request_duration_seconds',
      help: 'HTTP requests by method, route pattern and status, and how long each took to answer',
      labelNames: ['method', 'route', 'status'],
      buckets: SECONDS_BUCKETS,
      registers: [this.registry],
    });
    this.commits = new Histogram({
      name: 'statehold_commit_duration_seconds',
      help: 'how long a commit (an event, a create, an upgrade) took to become durable',
      buckets: SECONDS_BUCKETS,
      registers: [this.registry],
    });
    this.events = new Counter({
      name: 'statehold_events_committed_total',
      help: 'transition records committed: events sent and fired (delayed, raised, messages), creates, upgrades',
      registers: [this.registry],
    });
    this.sandboxCalls = new Histogram({
      name: 'statehold_sandbox_call_duration_seconds',
      help: 'calls into a sandbox worker (machine code, loads), from the call to its answer',
      labelNames: ['worker'],
      buckets: SECONDS_BUCKETS,
      registers: [this.registry],
    });
    this.restarts = new Counter({
      name: 'statehold_sandbox_worker_restarts_total',
      help: 'sandbox workers replaced: died (crash), or retired for a call that held them (stall)',
      labelNames: ['worker', 'reason'],
      registers: [this.registry],
    });
  }

  /** For HttpServer's onAnswered. */
  readonly answered = (method: string, route: string, status: number, seconds: number): void => {
    const key = `${method} ${status} ${route}`;
    let child = this.requestChildren.get(key);
    if (!child) {
      child = this.requests.labels(method, route, String(status));
      this.requestChildren.set(key, child);
    }
    child.observe(seconds);
  };

  /** For the runtime (InstanceRuntimeDeps.meters). */
  readonly runtimeMeters: RuntimeMeters = {
    committed: (records, seconds) => {
      this.commits.observe(seconds);
      this.events.inc(records);
    },
  };

  /** For a SandboxClient's onAnswered. */
  sandboxCallTimer(worker: 'main' | 'quarantine'): (seconds: number) => void {
    const child = this.sandboxCalls.labels(worker);
    return (seconds) => child.observe(seconds);
  }

  workerRestarted(worker: 'main' | 'quarantine' | 'validation', reason: 'crash' | 'stall'): void {
    this.restarts.inc({ worker, reason });
  }

  /** A gauge read at each scrape. */
  gauge(name: string, help: string, read: Read): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** A gauge with one label read at each scrape: one value per label value `read` returns. */
  labelledGauge(name: string, help: string, label: string, read: () => Record<string, number>): void {
    new Gauge({
      name,
      help,
      labelNames: [label],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [value, count] of Object.entries(read())) this.set({ [label]: value }, count);
      },
    });
  }

  /** A counter the node keeps anyway (a plain number that only grows), read at each scrape. */
  counter(name: string, help: string, read: Read): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  /** A counter and a latency histogram a hot path adds to (a cluster's forwarded requests). */
  timedCounter(name: string, help: string, labelName: string): (label: string, seconds: number) => void {
    const histogram = new Histogram({ name, help, labelNames: [labelName], buckets: SECONDS_BUCKETS, registers: [this.registry] });
    const children = new Map<string, Histogram.Internal<string>>();
    return (label, seconds) => {
      let child = children.get(label);
      if (!child) {
        child = histogram.labels(label);
        children.set(label, child);
      }
      child.observe(seconds);
    };
  }

  /** Pending timers and the outbox's messages, counted in the node's LMDB at a scrape. */
  storeBacklog(read: () => { timersPending: number; outboxDepth: number }): void {
    this.gauge('statehold_timers_pending', "delayed events waiting for their time, in this node's store", () => read().timersPending);
    this.gauge(
      'statehold_outbox_depth',
      "messages between instances waiting to be delivered, in this node's store",
      () => read().outboxDepth,
    );
  }

  /** The sizes of the data dir's files: LMDB's and the write-ahead log's segments. */
  dataDirSizes(dataDir: string): void {
    this.gauge('statehold_lmdb_bytes', "size of the node's LMDB file", () => fileBytes(join(dataDir, 'statehold.lmdb')));
    this.gauge('statehold_wal_bytes', "size of the write-ahead log's segments (and their zero-filled spares)", () =>
      dirBytes(join(dataDir, 'wal')),
    );
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

const fileBytes = (path: string): number => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

const dirBytes = (dir: string): number => {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  return names.reduce((sum, name) => sum + fileBytes(join(dir, name)), 0);
};
