import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';

/**
 * An instance's history of large events is read in pages that end before 4 MiB of records (at least one
 * record each), each with a cursor to the next, every record whole and in order: on one node, and on a
 * cluster through nodes that do not own the instance, where a page larger than one NATS message (8 MB)
 * went unanswered and the read failed after 80 s.
 */
const code = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'big', initial: 'on', predictableActionArguments: true, context: { n: 0 },
  states: { on: { on: { ADD: { actions: assign({ n: (c) => c.n + 1 }) } } } } });
export const allowRead = () => true;
export const allowWrite = () => true;`;

const node = await startNode();
t.teardown(() => node.stop());
const { operator } = await machineWithVersion(node, 'big', code);
const admin = node.adminKey as string;

t.test('a history of 1 MB events comes in pages under 4 MiB, every record once', async (t) => {
  await operator.machineInstances.create('big', { slug: 'h' });
  const pad = 'x'.repeat(1_000_000);
  for (let i = 1; i <= 10; i++) await operator.machineInstances.sendEvent('big', 'h', { event: { type: 'ADD', i, pad } });
  const pages: { transitions: { event: { type: string; i?: number; pad?: string } }[]; cursor?: string }[] = [];
  let cursor: string | undefined;
  do {
    const started = Date.now();
    const page = await call(node.url, 'GET', `/machines/big/i/h/events${cursor ? `?cursor=${cursor}` : ''}`, { token: admin });
    t.equal(page.status, 200, `page ${pages.length + 1} in ${Date.now() - started} ms`);
    pages.push(page.body);
    cursor = page.body.cursor;
  } while (cursor && pages.length < 20);
  const events = pages.flatMap((page) => page.transitions.map((transition) => transition.event));
  t.same(
    events.map((event) => event.i ?? event.type),
    ['xstate.init', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    'every record once, in order',
  );
  t.ok(
    events.slice(1).every((event) => event.pad === pad),
    'each whole',
  );
  t.ok(pages.length >= 3, `${pages.length} pages of ${pages.map((page) => page.transitions.length).join(', ')} records`);
  for (const page of pages)
    t.ok(JSON.stringify(page.transitions).length < 4 * 1024 * 1024 + 1_100_000, 'under 4 MiB but for its last record');
});
