import t from 'tap';
import type { JsonObject, MachineEvent } from '../src/domain/machine-state.js';
import type { FakeMachine } from './helpers/fake-sandbox.js';
import { historyOf, MACHINE, noAuth, ORG, runtimeHarness } from './helpers/runtime-harness.js';

/**
 * InstanceRuntime's writes, in process: a scripted fake sandbox, a real LMDB store in a temporary
 * directory, a clock moved by hand (helpers/runtime-harness.ts). No server, no isolate.
 */
const logOf = (context: JsonObject): string[] => context.log as string[];
const noted = (context: JsonObject, event: MachineEvent): JsonObject => ({ ...context, log: [...logOf(context), event.note as string] });

const notes: FakeMachine = {
  initial: 'idle',
  context: { log: [] },
  allowWrite: (request) => request.authContext.deny !== true,
  states: {
    idle: {
      on: {
        NOTE: { assign: noted },
        WORK: { target: 'working' },
        PING: { sendTo: { machine: MACHINE, name: 'receiver', event: { type: 'NOTE', note: 'from sender' } } },
      },
    },
    // a child that never finishes: the step cannot settle within the budget
    working: {
      invoke: { id: 'child' },
      on: {
        'error.platform.child': { target: 'failed', assign: (c) => ({ ...c, log: [...logOf(c), 'child error'] }) },
        NEXT: { target: 'next' },
      },
    },
    failed: { on: { NEXT: { target: 'after-failed', assign: (c) => ({ ...c, log: [...logOf(c), 'next'] }) } } },
    next: {},
    'after-failed': {},
  },
};

t.test('create: allowWrite and start in one call, the first record committed, a second create of the name refused', async (t) => {
  const h = runtimeHarness({ versions: { v1: notes } });
  t.teardown(() => h.close());
  const head = await h.runtime.create({
    orgId: ORG,
    machine: MACHINE,
    name: 'a',
    versionId: 'v1',
    context: { log: ['given'] },
    authContext: noAuth,
  });
  t.equal(head.state, 'idle');
  t.same(head.context, { log: ['given'] }, 'the given context over the default one');
  t.equal(head.seq, 1);
  t.equal(head.createdAt, new Date(h.clock.now()).toISOString(), 'dated by the injected clock');
  t.same(h.store.instances.getInstance(ORG, MACHINE, 'a'), head, 'durable before the answer');
  t.same(historyOf(h, 'a'), ['xstate.init']);
  t.same(h.sandboxes.version('v1').calls, ['allowWrite', 'start']);
  await t.rejects(h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'a', versionId: 'v1', context: {}, authContext: noAuth }), {
    status: 409,
    code: 'invalid-state',
  });
  const retried = { orgId: ORG, machine: MACHINE, name: 'b', versionId: 'v1', context: {}, authContext: noAuth, requestId: 'req_b' };
  const first = await h.runtime.create(retried);
  t.same(await h.runtime.create(retried), first, 'a create retried with its request id answers the instance it made');
  t.same(historyOf(h, 'b'), ['xstate.init']);
});

t.test('send: events to one instance are applied one after another, in the order sent, each committed before its answer', async (t) => {
  // Each step takes a random few ms: without the mailbox, the calls would interleave.
  const h = runtimeHarness({ versions: { v1: { ...notes, stepDelayMs: () => Math.random() * 3 } } });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'a', versionId: 'v1', context: {}, authContext: noAuth });
  const sent = Array.from({ length: 12 }, (_, i) => `n${i}`);
  const answers = await Promise.all(sent.map((note) => h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note }, noAuth)));
  t.same(
    answers.map((head) => head.seq),
    sent.map((_, i) => i + 2),
    'each answer is the commit of its own event, numbered in the order sent',
  );
  t.same(
    answers.map((head) => logOf(head.context).at(-1)),
    sent,
    'each answer holds its own event as the last applied',
  );
  const records = h.store.instances.listTransitions(ORG, MACHINE, 'a', 0, 100);
  t.same(
    records.map((r) => r.event.note ?? r.event.type),
    ['xstate.init', ...sent],
  );
  t.ok(
    records.every((r, i) => i === 0 || r.ts > (records[i - 1]?.ts ?? 0)),
    'commit times strictly increase',
  );
  t.same(logOf(h.runtime.head(ORG, MACHINE, 'a')?.context ?? {}), sent);
});

t.test('a request retried with its request id is applied once', async (t) => {
  const h = runtimeHarness({ versions: { v1: notes } });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'a', versionId: 'v1', context: {}, authContext: noAuth });
  const first = await h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note: 'once' }, noAuth, 'req_1');
  await h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note: 'other' }, noAuth, 'req_2');
  const again = await h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note: 'once' }, noAuth, 'req_1', true);
  t.equal(again.seq, 3, 'the retry answers the committed state, applying nothing');
  t.same(logOf(again.context), ['once', 'other']);
  t.same(historyOf(h, 'a'), ['xstate.init', 'NOTE', 'NOTE']);
  t.equal(h.store.instances.listTransitions(ORG, MACHINE, 'a', 0, 10)[1]?.requestId, 'req_1', 'the request id is in its record');
  t.equal(first.seq, 2);
  const fresh = await h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note: 'new' }, noAuth, 'req_3', true);
  t.equal(fresh.seq, 4, 'a retry of a request never applied is applied');
});

t.test('a write allowWrite refuses leaves nothing behind', async (t) => {
  const h = runtimeHarness({ versions: { v1: notes } });
  t.teardown(() => h.close());
  const deny = { deny: true };
  await t.rejects(h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'a', versionId: 'v1', context: {}, authContext: deny }), {
    status: 403,
    code: 'rejected-by-machine-authorizer',
  });
  t.equal(h.store.instances.getInstance(ORG, MACHINE, 'a'), undefined, 'no head');
  t.same(historyOf(h, 'a'), [], 'no history');
  t.equal(h.runtime.head(ORG, MACHINE, 'a'), undefined);
  const made = await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'b', versionId: 'v1', context: {}, authContext: noAuth });
  await t.rejects(h.runtime.send(ORG, MACHINE, 'b', { type: 'PING' }, deny), { status: 403, code: 'rejected-by-machine-authorizer' });
  t.same(h.store.instances.getInstance(ORG, MACHINE, 'b'), made, 'the head is as it was');
  t.same(historyOf(h, 'b'), ['xstate.init']);
  t.same(h.store.instances.listOutbox(10), [], 'the refused event sent nothing');
  const after = await h.runtime.send(ORG, MACHINE, 'b', { type: 'NOTE', note: 'allowed' }, noAuth);
  t.equal(after.seq, 2, 'the next allowed event follows the last commit');
});

t.test('settle timeout: the children still running are stopped, and their error events go in before the next event', async (t) => {
  // (were the loop to wait in real time, it would wait 10 s at a time, forever: fail fast instead)
  t.setTimeout(10_000);
  const h = runtimeHarness({ versions: { v1: notes } });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'a', versionId: 'v1', context: {}, authContext: noAuth });
  const startedAt = h.clock.now();
  const realStart = Date.now();
  const timedOut = await h.runtime.send(ORG, MACHINE, 'a', { type: 'WORK' }, noAuth);
  t.equal(h.clock.now() - startedAt, 10_000, 'the settle loop waited out its 10 s budget on the injected clock');
  t.ok(Date.now() - realStart < 2_000, 'and not in real time');
  t.equal(timedOut.state, 'working', 'answered with the latest state');
  t.same(timedOut.stoppedChildren, ['child']);
  t.same(
    h.logs.lines.map((line) => [line.level, line.message]),
    [['warn', 'stopped child child: the machine did not settle within 10000 ms']],
  );
  const next = await h.runtime.send(ORG, MACHINE, 'a', { type: 'NEXT' }, noAuth);
  t.same(historyOf(h, 'a'), ['xstate.init', 'WORK', 'error.platform.child', 'NEXT'], 'the error event first, recorded');
  t.equal(next.state, 'after-failed', 'NEXT ran in the state the error event led to');
  t.same(logOf(next.context), ['child error', 'next']);
  t.same(next.stoppedChildren, [], 'owed once');
  t.ok(h.sandboxes.version('v1').calls.includes('allowWrite'), 'the event was authorized on its own before the error events ran');
});

t.test('a message in the outbox is received once, however often it is delivered', async (t) => {
  const h = runtimeHarness({ versions: { v1: notes } });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'sender', versionId: 'v1', context: {}, authContext: noAuth });
  await h.runtime.send(ORG, MACHINE, 'sender', { type: 'PING' }, noAuth);
  const outbox = h.store.instances.listOutbox(10);
  t.equal(outbox.length, 1, "written in the sender's commit");
  const message = outbox[0];
  if (!message) return;
  t.same(
    [message.kind, message.to, message.event],
    ['send', { machine: MACHINE, name: 'receiver' }, { type: 'NOTE', note: 'from sender' }],
  );
  await h.runtime.receive(message);
  const receiver = h.runtime.head(ORG, MACHINE, 'receiver');
  t.equal(receiver?.madeDepth, 1, 'the receiver did not exist: made with the default context on the current version');
  t.same(logOf(receiver?.context ?? {}), ['from sender']);
  t.ok(h.store.instances.hasReceived(ORG, MACHINE, 'receiver', message.id));
  await h.runtime.receive(message);
  await h.runtime.receive(message);
  t.same(historyOf(h, 'receiver'), ['xstate.init', 'NOTE'], 'redeliveries applied nothing');
  t.same(logOf(h.runtime.head(ORG, MACHINE, 'receiver')?.context ?? {}), ['from sender']);
});

t.test('a queued message whose event is shaped as xstate 4 wraps its own ($$type "scxml") is dropped, logged on its sender', async (t) => {
  // (sends are refused as they leave their step now; one queued before that check is caught here)
  const h = runtimeHarness({ versions: { v1: notes } });
  t.teardown(() => h.close());
  await h.runtime.create({ orgId: ORG, machine: MACHINE, name: 'sender', versionId: 'v1', context: {}, authContext: noAuth });
  await h.runtime.send(ORG, MACHINE, 'sender', { type: 'PING' }, noAuth);
  const [queued] = h.store.instances.listOutbox(10);
  if (!queued) return t.fail('no message queued');
  const forged = { ...queued, event: { type: 'NOTE', $$type: 'scxml', name: 'done.invoke.x', note: 'forged' } };
  await h.runtime.receive(forged);
  t.equal(h.runtime.head(ORG, MACHINE, 'receiver'), undefined, 'nothing was delivered (the receiver was not even made)');
  t.ok(h.store.instances.hasReceived(ORG, MACHINE, 'receiver', forged.id), 'taken as received: not tried again');
  t.match(
    h.logs.lines.map((line) => line.message),
    [/message to .*receiver dropped: an event may not have \$\$type "scxml"/],
  );
});

t.test('settleNotOwned: waits for the work under way on instances given away (a cluster hand-over), within its bound', async (t) => {
  // (each step takes 150 ms of real time, so a send is still under way when the hand-over looks)
  const h = runtimeHarness({ versions: { v1: { ...notes, stepDelayMs: () => 150 } } });
  t.teardown(() => h.close());
  for (const name of ['a', 'b'])
    await h.runtime.create({ orgId: ORG, machine: MACHINE, name, versionId: 'v1', context: { log: [] }, authContext: noAuth });
  const ownsOnlyB = (_org: string, _machine: string, name: string) => name === 'b';
  t.equal(await h.runtime.settleNotOwned(ownsOnlyB, 1_000), true, 'nothing under way: settled at once');

  const sent = h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note: 'under way' }, noAuth);
  t.equal(await h.runtime.settleNotOwned(ownsOnlyB, 1_000), true, 'settled once the send ran');
  t.equal(historyOf(h, 'a').at(-1), 'NOTE', 'the send had committed by then');
  await sent;

  const late = h.runtime.send(ORG, MACHINE, 'a', { type: 'NOTE', note: 'slow' }, noAuth);
  t.equal(await h.runtime.settleNotOwned(ownsOnlyB, 20), false, 'not within 20 ms: said so');
  await late;

  const kept = h.runtime.send(ORG, MACHINE, 'b', { type: 'NOTE', note: 'kept' }, noAuth);
  const startedAt = Date.now();
  t.equal(await h.runtime.settleNotOwned(ownsOnlyB, 1_000), true);
  t.ok(Date.now() - startedAt < 100, 'work on an instance still owned is not waited for');
  await kept;
});
