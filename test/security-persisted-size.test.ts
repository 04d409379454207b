/**
 * SECURITY FINDING (medium): the 400 KiB bound on an instance's persisted state is bypassed by
 * delayed events (and, with JSON.stringify tampering, by the snapshot).
 *
 * instance-runtime.ts checkContext() measures only `result.context`. The instance head also stores
 * `pendingTimers` (each with its full delayed event) and `snapshot`, both produced by machine code and
 * unbounded. A machine that schedules 40 delayed sends carrying 1 MB each gets a 40 MB head committed
 * with 200; every later event rewrites (and fsyncs) it, heads are cached in memory and the LRU is
 * sized by context bytes only (actors.resize(actor, contextBytes + 4096)). Measured: +40 MB on disk
 * per event, +450 MB host RSS after four events on one instance.
 *
 * Fails while the finding stands (expects the event to be refused like an oversized context).
 */
import t from 'tap';
import { call } from './helpers/http.js';
import { startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { ALLOW_ALL } from './fixtures/security/machines.js';

const bigTimers = `import { createMachine, send } from 'npm:xstate';
const sends = [];
for (let i = 0; i < 10; i++) sends.push(send(() => ({ type: 'LATER', pad: 'y'.repeat(1000000) }), { delay: 3600000, id: 'later' + i }));
export default createMachine({ id: 'big', initial: 'a', context: {}, states: { a: { on: { BIG: { actions: sends }, NOOP: {} } } } });
${ALLOW_ALL}`;

const bigContext = `import { createMachine, assign } from 'npm:xstate';
export default createMachine({ id: 'bigctx', initial: 'a', context: {}, states: { a: { on: { BIG: { actions: assign(() => ({ pad: 'y'.repeat(1000000) })) } } } } });
${ALLOW_ALL}`;

t.test('persisted instance state is bounded, whatever part of it carries the bytes', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());

  // (defended) the same bytes in the context are refused
  await machineWithVersion(node, 'bigctx', bigContext);
  t.equal((await call(node.url, 'POST', '/machines/bigctx', { token: node.adminKey, body: { slug: 'i' } })).status, 200);
  const ctx = await call(node.url, 'POST', '/machines/bigctx/i/i/events', { token: node.adminKey, body: { event: 'BIG' } });
  t.equal(ctx.status, 400, 'a 1 MB context is refused');
  t.equal(ctx.body?.code, 'context-too-large');

  // the finding: the same bytes in delayed events are committed
  await machineWithVersion(node, 'big', bigTimers);
  t.equal((await call(node.url, 'POST', '/machines/big', { token: node.adminKey, body: { slug: 'i' } })).status, 200);
  const res = await call(node.url, 'POST', '/machines/big/i/i/events', { token: node.adminKey, body: { event: 'BIG' } });
  t.comment(`10 MB of delayed events: ${res.status} ${res.text.slice(0, 120)}`);
  t.equal(res.status, 400, 'an event leaving ~10 MB of pending delayed events in the instance head must be refused');
});
