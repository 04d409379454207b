import { StateBackedClient } from '@statebacked/client';
import { call } from './http.js';
import type { NodeProcess } from './node-process.js';

/** A machine and the events its instances get, one after the other, each sent to every instance in turn. */
export interface RoundRobinCase {
  machine: string;
  code: string;
  events: (string | { type: string; [k: string]: unknown })[];
  /**
   * The machine has delayed events due within a few tens of milliseconds: after each event the run
   * waits until they fired (TIMERS_DUE_MS, then until the history stops growing), so that every node
   * sees each of them before or after the same events. An answer never waits for them, and a timer
   * scheduler may run late, so without the wait a node could take one after the next event, another
   * before; with it, one that is late is still delivered before the next event (EventDelivery).
   */
  timers?: boolean;
}

/** What a case with `timers` waits after each event before it looks for its delayed events: past the fixtures' short delays. */
const TIMERS_DUE_MS = 60;

/** The instances a case runs on. */
export const INSTANCES = ['i1', 'i2', 'i3'];

type Answer = { status: number; body: unknown; context: unknown };
/** Each instance's answers (with its context after each) and its history (event and state of every record). */
export type RoundRobinRun = { answers: Record<string, Answer[]>; histories: Record<string, unknown> };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What an answer says, without its time (ts differs from node to node). */
const untimed = (body: unknown): unknown => {
  if (body === null || typeof body !== 'object') return body;
  const { ts: _ts, ...rest } = body as Record<string, unknown>;
  return rest;
};

/**
 * Creates the case's machine on `node` and its INSTANCES, then sends each event to every instance in
 * turn: on a node with one live actor, each event finds its instance evicted and restores it.
 */
export async function runRoundRobin(node: NodeProcess, c: RoundRobinCase): Promise<RoundRobinRun> {
  const token = node.adminKey as string;
  const client = new StateBackedClient(token, { apiHost: node.url });
  await client.machines.create(c.machine);
  await client.machineVersions.create(c.machine, { clientInfo: 'v1', makeCurrent: true, code: c.code });
  const run: RoundRobinRun = { answers: {}, histories: {} };
  const admin = async (name: string) =>
    (await call(node.url, 'GET', `/machines/${c.machine}/i/${name}/admin`, { token })).body as { context: unknown };
  const records = async (name: string) =>
    ((await call(node.url, 'GET', `/machines/${c.machine}/i/${name}/events`, { token })).body as { transitions: unknown[] }).transitions
      .length;
  /** The delayed events due soon after the event, fired (see RoundRobinCase.timers). */
  const timersFired = async (name: string) => {
    if (!c.timers) return;
    await sleep(TIMERS_DUE_MS);
    let before = await records(name);
    for (let i = 0; i < 40; i++) {
      await sleep(50);
      const now = await records(name);
      if (now === before) return;
      before = now;
    }
  };
  for (const name of INSTANCES) {
    const created = await call(node.url, 'POST', `/machines/${c.machine}`, { token, body: { slug: name, context: { id: name } } });
    await timersFired(name);
    run.answers[name] = [{ status: created.status, body: untimed(created.body), context: (await admin(name)).context }];
  }
  for (const event of c.events) {
    for (const name of INSTANCES) {
      const answer = await call(node.url, 'POST', `/machines/${c.machine}/i/${name}/events`, { token, body: { event } });
      await timersFired(name);
      run.answers[name]?.push({ status: answer.status, body: untimed(answer.body), context: (await admin(name)).context });
    }
  }
  for (const name of INSTANCES) {
    const history = await call(node.url, 'GET', `/machines/${c.machine}/i/${name}/events`, { token });
    run.histories[name] = (history.body as { transitions: { event: unknown; state: unknown }[] }).transitions.map((tr) => ({
      event: tr.event,
      state: tr.state,
    }));
  }
  return run;
}
