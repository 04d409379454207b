import { callApi, LEDGER, type LoadReport, type SentEvent } from './cluster-load.js';

/**
 * A bounded closed-loop load of creates and sends for a cluster whose members change under it (a node
 * joins, leaves, starts again): nodes are added to it as they listen and retired as they go; every
 * request's answer and latency is recorded. The sends go in a LoadReport that cluster-load.ts's
 * checkInvariants reads; the creates add instances that later sends reach too.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One request of the load, as answered. */
export interface Answer {
  kind: 'send' | 'create';
  /** The node's id it went to. */
  node: string;
  /** The instance it created or sent to. */
  instance: string;
  status: number;
  /** From the request to its answer. */
  ms: number;
  /** When it was sent, in ms since the load started. */
  at: number;
  /** An answer the ledger accounts for: 2xx, or BOOM's 400 and DENY's 403. */
  expected: boolean;
  /** Refused by a node that was told to leave, as it closed (503 "shutting down", or no connection): not a failure of the service. */
  leaving: boolean;
  code?: string;
  message?: string;
}

export interface MembershipLoadReport extends LoadReport {
  answers: Answer[];
  /** The instances this load created and that were acknowledged. */
  created: string[];
}

interface Options {
  token: string;
  orgId: string;
  /** The instances that exist when it starts: sends go to them and to those it creates. */
  names: string[];
  /** Names this load's event ids, workers and instances (unique per load on one cluster). */
  prefix: string;
  workersPerNode: number;
  /** Of each worker's requests, every `createEvery`-th creates an instance (while fewer than maxCreates were). */
  createEvery: number;
  maxCreates: number;
  /** At most this many requests in all, and for at most this long. */
  maxRequests: number;
  maxMs: number;
}

const expectedStatus = { INC: 200, BOOM: 400, DENY: 403, create: 200 } as const;

/** Whether an answer is a node's refusal as it closes: 503 from its drain, or its connection gone. */
const closing = (status: number, body: any): boolean =>
  status === 0 || (status === 503 && typeof body?.error === 'string' && body.error.includes('shutting down'));

export const startMembershipLoad = (options: Options) => {
  const startedAt = Date.now();
  const events: SentEvent[] = [];
  const answers: Answer[] = [];
  const created: string[] = [];
  const pool = [...options.names];
  const workers: Array<Promise<void>> = [];
  const retired = new Set<string>();
  const leaving = new Set<string>();
  const indexOf = new Map<string, number>();
  let stopped = false;
  let issued = 0;
  let creates = 0;

  const worker = async (node: { id: string; url: string }, w: number) => {
    const name = `${options.prefix}-${node.id}w${w}`;
    const nodeIndex = indexOf.get(node.id) as number;
    for (let i = 0; !stopped && !retired.has(node.id) && issued < options.maxRequests && Date.now() - startedAt < options.maxMs; i++) {
      issued++;
      const at = Date.now() - startedAt;
      const create = i % options.createEvery === options.createEvery - 1 && creates < options.maxCreates;
      if (create) creates++;
      const type = create ? 'create' : i % 10 === 3 ? 'BOOM' : i % 10 === 7 ? 'DENY' : 'INC';
      const id = `${name}-${i}`;
      const instance = create ? id : (pool[(w * 7 + nodeIndex * 3 + i) % pool.length] as string);
      const started = performance.now();
      const { status, body } = create
        ? await callApi(node.url, 'POST', `/machines/${LEDGER}`, options.token, { orgId: options.orgId, body: { slug: instance } })
        : await callApi(node.url, 'POST', `/machines/${LEDGER}/i/${instance}/events`, options.token, {
            orgId: options.orgId,
            body: { event: { type, id } },
          });
      const ms = performance.now() - started;
      const refusedAsItLeft = leaving.has(node.id) && closing(status, body);
      answers.push({
        kind: create ? 'create' : 'send',
        node: node.id,
        instance,
        status,
        ms,
        at,
        expected: status === expectedStatus[type],
        leaving: refusedAsItLeft,
        ...(body?.code ? { code: String(body.code) } : {}),
        ...(status !== expectedStatus[type] ? { message: String(body?.error ?? '') } : {}),
      });
      if (create) {
        if (status >= 200 && status < 300) {
          created.push(instance);
          pool.push(instance);
        }
      } else {
        events.push({
          id,
          type: type as SentEvent['type'],
          name: instance,
          node: nodeIndex,
          worker: name,
          status,
          outcome: status >= 200 && status < 300 ? 'ok' : status >= 400 && status < 500 ? 'rejected' : 'failed',
          ...(body?.code ? { code: String(body.code) } : {}),
          at,
        });
      }
      // A node that is going refuses from now on: its workers stop (the others carry the load).
      if (refusedAsItLeft) return;
      if (!(status >= 200 && status < 500)) await sleep(50);
    }
  };

  return {
    startedAt,
    /** Starts this node's workers (a node that just began to listen). */
    add(node: { id: string; url: string }) {
      if (!indexOf.has(node.id)) indexOf.set(node.id, indexOf.size);
      retired.delete(node.id);
      leaving.delete(node.id);
      for (let w = 0; w < options.workersPerNode; w++) workers.push(worker(node, w));
    },
    /** The node was told to leave: its refusals as it closes are counted apart, and end its workers. */
    leaving(id: string) {
      leaving.add(id);
    },
    /** No more requests to this node (its workers finish the one in flight). */
    retire(id: string) {
      retired.add(id);
    },
    sent: () => issued,
    /**
     * Requests answered 2xx so far (by node `node` only, when given; sent at or after `since`, a
     * Date.now(), when given): what a phase waits for instead of a fixed time under load.
     */
    acknowledged: ({ node, since }: { node?: string; since?: number } = {}) =>
      answers.filter(
        (answer) =>
          answer.status >= 200 &&
          answer.status < 300 &&
          (node === undefined || answer.node === node) &&
          (since === undefined || startedAt + answer.at >= since),
      ).length,
    async stop(): Promise<MembershipLoadReport> {
      stopped = true;
      // (workers added while others finish are awaited too)
      let awaited = 0;
      while (awaited < workers.length) {
        const batch = workers.slice(awaited);
        awaited = workers.length;
        await Promise.all(batch);
      }
      const endedAt = Date.now();
      return {
        events,
        answers,
        created,
        startedAt,
        endedAt,
        count: (outcome) => events.filter((event) => event.outcome === outcome).length,
      };
    },
  };
};

/** p50, p99 and max of the answers' latencies, in ms, with the slowest answer's node and time. */
export const latencies = (answers: Answer[]) => {
  const sorted = answers.map((answer) => answer.ms).sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const slowest = answers.reduce<Answer | undefined>((worst, answer) => (worst && worst.ms >= answer.ms ? worst : answer), undefined);
  return { count: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? 0, slowest };
};

/** A line for the test's output: what the load did, by status, and its latencies. */
export const loadLine = (phase: string, report: MembershipLoadReport): string => {
  const byStatus = new Map<string, number>();
  for (const answer of report.answers) {
    const key = `${answer.kind} ${answer.status}${answer.leaving ? ' (leaving node)' : ''}`;
    byStatus.set(key, (byStatus.get(key) ?? 0) + 1);
  }
  const { count, p50, p99, max, slowest } = latencies(report.answers);
  const slow = report.answers
    .filter((answer) => answer.ms >= 250)
    .sort((a, b) => a.at - b.at)
    .map(
      (answer) => `${answer.kind} to ${answer.node} (${answer.instance}) at ${(answer.at / 1000).toFixed(2)} s: ${answer.ms.toFixed(0)} ms`,
    );
  return (
    `${phase}: ${count} requests in ${((report.endedAt - report.startedAt) / 1000).toFixed(1)} s, ${report.created.length} instances created ` +
    `(${[...byStatus].map(([key, n]) => `${key}: ${n}`).join(', ')}); latency p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, ` +
    `max ${max.toFixed(0)} ms${slowest ? ` (${slowest.kind} to ${slowest.node} at ${(slowest.at / 1000).toFixed(1)} s, ${slowest.status})` : ''}; ` +
    `${slow.length} took 250 ms or more${slow.length > 0 ? `: ${slow.slice(0, 12).join('; ')}` : ''}`
  );
};

/** Every instance of the ledger, as listed through a node (all pages). */
export const listThrough = async (url: string, token: string, orgId: string): Promise<string[]> => {
  const slugs: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1_000; page++) {
    const { status, body } = await callApi(
      url,
      'GET',
      `/machines/${LEDGER}/i${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`,
      token,
      { orgId },
    );
    if (status !== 200) throw new Error(`list through ${url}: ${status} ${JSON.stringify(body)}`);
    for (const instance of body.instances as Array<{ slug: string }>) slugs.push(instance.slug);
    cursor = body.cursor;
    if (!cursor) break;
  }
  return slugs;
};

export interface ClusterView {
  nodeId: string;
  state: string;
  members: Array<{ id: string; state: string } | null>;
  partitions: { count: number; held: Array<{ partition: number; ready: boolean }> };
  heldInstances: number;
  storedInstances: number;
}

/** GET /cluster on a node (undefined if it does not answer 200). */
export const clusterView = async (url: string, token: string): Promise<ClusterView | undefined> => {
  const { status, body } = await callApi(url, 'GET', '/cluster', token, { timeoutMs: 5_000 });
  return status === 200 ? (body as ClusterView) : undefined;
};

/** Waits until the node says it is ready and holds every partition it holds caught up; returns how long that took. */
export const untilReady = async (url: string, token: string, withinMs = 30_000): Promise<number> => {
  const started = Date.now();
  for (;;) {
    const view = await clusterView(url, token);
    if (view?.state === 'ready' && view.partitions.held.every((held) => held.ready)) return Date.now() - started;
    if (Date.now() - started > withinMs)
      throw new Error(`${url} was not ready in ${withinMs} ms: ${JSON.stringify(view && { state: view.state, held: view.partitions })}`);
    await sleep(100);
  }
};
