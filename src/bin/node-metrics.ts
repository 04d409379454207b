import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import { LatencyHistogram } from './latency-histogram.js';
import type { RuntimeMeters } from '../runtime/runtime-parts.js';

/** Latency buckets, in seconds: from a sub-millisecond commit to a settle that took its whole budget. */
const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type Read = () => number;

/** HTTP methods by index, for the key of a request's series (any other is counted as OTHER by the server). */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'OTHER'];

/**
 * A node's metrics (GET /metrics, Prometheus's text format), on a registry of its own. What the hot
 * path counts is O(1) there and costs tens of nanoseconds: the durations of requests, commits and
 * sandbox calls in histograms of our own (latency-histogram.ts), each series made once and kept, and
 * a counter added to. Everything else (actors, timers, the outbox, sockets, file sizes, a cluster's
 * state) is read only when a scraper asks, from counts the node keeps anyway.
 */
export class NodeMetrics {
  readonly registry = new Registry();
  /** Written out after the registry's metrics. */
  private readonly histograms: LatencyHistogram[] = [];
  private readonly requests: LatencyHistogram;
  /** The series of `requests` by route pattern, then by status × 8 + method index. */
  private readonly requestSeries = new Map<string, Map<number, (seconds: number) => void>>();
  private readonly commitTime: (seconds: number) => void;
  private readonly events: Counter;
  private readonly sandboxCalls: LatencyHistogram;
  private readonly restarts: Counter<'worker' | 'reason'>;
  private processMetrics = false;

  constructor() {
    this.requests = this.histogram(
      'statehold_http_request_duration_seconds',
      'HTTP requests by method, route pattern and status, and how long each took to answer',
    );
    this.commitTime = this.histogram(
      'statehold_commit_duration_seconds',
      'how long a commit (an event, a create, an upgrade) took to become durable',
    ).series();
    this.events = new Counter({
      name: 'statehold_events_committed_total',
      help: 'transition records committed: events sent and fired (delayed, raised, messages), creates, upgrades',
      registers: [this.registry],
    });
    this.sandboxCalls = this.histogram(
      'statehold_sandbox_call_duration_seconds',
      'calls into a sandbox worker (machine code, loads), from the call to its answer',
    );
    this.restarts = new Counter({
      name: 'statehold_sandbox_worker_restarts_total',
      help: 'sandbox workers replaced: died (crash), or retired for a call that held them (stall)',
      labelNames: ['worker', 'reason'],
      registers: [this.registry],
    });
  }

  /** For HttpServer's onAnswered. (The route is one of the router's pattern strings, the same few each time.) */
  readonly answered = (method: string, route: string, status: number, seconds: number): void => {
    let byRoute = this.requestSeries.get(route);
    if (!byRoute) {
      byRoute = new Map();
      this.requestSeries.set(route, byRoute);
    }
    const methodIndex = METHODS.indexOf(method);
    const key = status * 8 + (methodIndex < 0 ? 7 : methodIndex);
    let observe = byRoute.get(key);
    if (!observe) {
      observe = this.requests.series({ method: METHODS[key % 8] as string, route, status: String(status) });
      byRoute.set(key, observe);
    }
    observe(seconds);
  };

  /** For the runtime (InstanceRuntimeDeps.meters). */
  readonly runtimeMeters: RuntimeMeters = {
    committed: (records, seconds) => {
      this.commitTime(seconds);
      this.events.inc(records);
    },
  };

  /** For a SandboxClient's onAnswered. */
  sandboxCallTimer(worker: 'main' | 'quarantine'): (seconds: number) => void {
    return this.sandboxCalls.series({ worker });
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

  /** A latency histogram (with its count) a hot path adds to, by one label (a cluster's forwarded requests by outcome). */
  timedCounter(name: string, help: string, labelName: string): (label: string, seconds: number) => void {
    const histogram = this.histogram(name, help);
    const series = new Map<string, (seconds: number) => void>();
    return (label, seconds) => {
      let observe = series.get(label);
      if (!observe) {
        observe = histogram.series({ [labelName]: label });
        series.set(label, observe);
      }
      observe(seconds);
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

  async text(): Promise<string> {
    // prom-client's process metrics (unprefixed, process_* and nodejs_*, as dashboards for Node.js
    // expect them) start with the first scrape: they watch every GC and the event loop's delay, which
    // cost each request ≈ 1 µs here (GET /health: ≈ 16.5 µs of CPU without them), and a node nobody
    // scrapes should not pay that. (CPU and memory are the process's since its start all the same.)
    if (!this.processMetrics) {
      this.processMetrics = true;
      collectDefaultMetrics({ register: this.registry });
    }
    const registered = await this.registry.metrics();
    return [registered.trimEnd(), ...this.histograms.map((histogram) => histogram.exposition())].join('\n\n');
  }

  private histogram(name: string, help: string): LatencyHistogram {
    const histogram = new LatencyHistogram(name, help, SECONDS_BUCKETS);
    this.histograms.push(histogram);
    return histogram;
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
