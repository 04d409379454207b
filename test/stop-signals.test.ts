/**
 * A stop signal sent to the node's whole process group (systemd's default KillMode=control-group; Ctrl-C
 * in a terminal sends SIGINT to the foreground group) reaches its sandbox workers too. The node must
 * drain exactly as when the signal is sent to it alone: the requests in flight are answered 200 or
 * 503, no machine code is blamed, no worker is started during the drain, the exit code is 0, and
 * every acknowledged event is in the history once after a restart.
 */
import t from 'tap';
import { Agent } from 'undici';
import { call } from './helpers/http.js';
import { startNode, tempDataDir, removeDir } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

const counter = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'counter', initial: 'on', predictableActionArguments: true, context: { public: { n: 0 } }, states: { on: { on: {
  ADD: { actions: assign({ public: (c) => ({ n: c.public.n + 1 }) }) },
} } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const INSTANCES = 16;
const IN_FLIGHT = 64;
/** Each sender stops after this many events or this long, whichever comes first. */
const MAX_EVENTS_PER_SENDER = 2_000;
const MAX_SENDING_MS = 20_000;

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal} to the process group under ${IN_FLIGHT} requests in flight drains like ${signal} to the node alone`, async (t) => {
    const dataDir = tempDataDir();
    t.teardown(() => removeDir(dataDir));
    const node = await startNode({ dataDir, ownProcessGroup: true });
    t.teardown(() => node.stop('SIGKILL'));
    const token = node.adminKey as string;
    await machineWithVersion(node, 'counter', counter);
    for (let i = 0; i < INSTANCES; i++)
      t.equal((await call(node.url, 'POST', '/machines/counter', { token, body: { slug: `c${i}` } })).status, 200);

    // Each answered event is remembered by its instance and tag; anything but 200 and 503 is a failure.
    const acknowledged = new Map<string, string[]>();
    const statuses = new Map<number, number>();
    let connectionErrors = 0;
    const dispatcher = new Agent({ connections: IN_FLIGHT, pipelining: 0 });
    t.teardown(() => dispatcher.close());
    let stop = false;
    let answered = 0;
    const started = Date.now();
    const sender = async (k: number) => {
      for (let j = 0; j < MAX_EVENTS_PER_SENDER && !stop && Date.now() - started < MAX_SENDING_MS; j++) {
        const instance = `c${(k + j) % INSTANCES}`;
        const tag = `${k}-${j}`;
        try {
          const response = await dispatcher.request({
            origin: node.url,
            path: `/machines/counter/i/${instance}/events`,
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ event: { type: 'ADD', tag } }),
          });
          await response.body.text();
          statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
          answered++;
          if (response.statusCode === 200) acknowledged.set(instance, [...(acknowledged.get(instance) ?? []), tag]);
        } catch {
          // After the listener closed: refused or reset, never answered, so never acknowledged.
          connectionErrors++;
          return;
        }
      }
    };
    const senders = Array.from({ length: IN_FLIGHT }, (_, k) => sender(k));
    // Signal once the load is well under way.
    for (const until = Date.now() + 10_000; answered < 500 && Date.now() < until;) await new Promise((resolve) => setTimeout(resolve, 20));
    t.ok(answered >= 500, `load was under way (${answered} answers) when the signal came`);
    process.kill(-(node.child.pid as number), signal);
    const exit = await node.stop(signal);
    stop = true;
    await Promise.all(senders);

    t.equal(exit, 0, `the node exited 0 (output:\n${node.output().slice(-2000)})`);
    t.same(
      [...statuses.keys()].filter((status) => status !== 200 && status !== 503),
      [],
      `only 200 and 503 answers: ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    const output = node.output();
    t.notMatch(output, /quarantine/, 'no version was quarantined');
    t.notMatch(output, /crashed its sandbox worker|sandbox worker died|a new one is starting/, 'no worker died or was started');
    t.match(output, 'stopped cleanly');
    t.comment(`answers: ${JSON.stringify(Object.fromEntries(statuses))}, connection errors after the close: ${connectionErrors}`);

    const restarted = await startNode({ dataDir, args: ['--admin-key', token] });
    t.teardown(() => restarted.stop('SIGKILL'));
    let applied = 0;
    for (let i = 0; i < INSTANCES; i++) {
      const instance = `c${i}`;
      const tags: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await call(
          restarted.url,
          'GET',
          `/machines/counter/i/${instance}/events${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`,
          { token },
        );
        t.equal(page.status, 200);
        for (const transition of page.body.transitions as { event: { type: string; tag?: string } }[])
          if (transition.event.type === 'ADD') tags.push(transition.event.tag as string);
        cursor = page.body.cursor;
      } while (cursor);
      const acked = acknowledged.get(instance) ?? [];
      const missing = acked.filter((tag) => !tags.includes(tag));
      const twice = tags.filter((tag, index) => tags.indexOf(tag) !== index);
      if (missing.length > 0 || twice.length > 0) t.fail(`${instance}: missing ${missing.join(' ')}; twice ${twice.join(' ')}`);
      // An event answered 503 (or not at all) may or may not have been applied; an acknowledged one was, once.
      applied += tags.length;
      const state = await call(restarted.url, 'GET', `/machines/counter/i/${instance}`, { token });
      t.equal(state.body.publicContext?.n, tags.length, `${instance}: the count matches its history`);
    }
    t.ok(
      applied >= [...acknowledged.values()].reduce((sum, tags) => sum + tags.length, 0),
      'every acknowledged event is in a history once',
    );
  });
}
