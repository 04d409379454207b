import { join } from 'node:path';
import t from 'tap';
import { rememberJsonText, stringifyWithKnownField, takeJsonText } from '../src/domain/json-texts.js';
import { parseStep, splitStep } from '../src/sandbox/step-result.js';
import { entryOf, entryText, type LogEntry } from '../src/store/jetstream/log-entries.js';
import type { FollowedMessage } from '../src/store/jetstream/stream-follower.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { WriteAheadLog } from '../src/store/lmdb/write-ahead-log.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';
import { instanceHead as head, transitionRecord as record } from './helpers/store-records.js';

/** One encoding per hop: a step's context goes into the head as the isolate's harness wrote it. */

t.test('a remembered text is spliced in once; without one, the object is encoded as JSON.stringify does', async (t) => {
  const plain = { a: 1, context: { b: [1, 'two'] }, z: null };
  t.same(stringifyWithKnownField(plain, 'context'), { text: JSON.stringify(plain) }, 'nothing remembered: JSON.stringify');

  const context = { b: [1, 'two'] };
  // Spaced as no JSON.stringify would: the text in the output can only be this one.
  rememberJsonText(context, '{ "b" : [1, "two"] }', 2);
  const withText = { a: 1, context, z: null };
  const spliced = stringifyWithKnownField(withText, 'context');
  t.same(spliced, {
    text: '{"a":1,"z":null,"context":{ "b" : [1, "two"] }}',
    spliced: { others: '{"a":1,"z":null}', maxDepth: 2 },
  });
  t.same(JSON.parse(spliced.text), withText, 'the same value');
  t.same(stringifyWithKnownField(withText, 'context'), { text: JSON.stringify(withText) }, 'taken once: the next encoding is a plain one');

  const alone = { k: 1 };
  rememberJsonText(alone, '{"k":1}', 1);
  t.equal(stringifyWithKnownField({ context: alone }, 'context').text, '{"context":{"k":1}}', 'the only field');
});

t.test('a text with a lone surrogate is not kept (as UTF-8 it would not read back as its value)', async (t) => {
  const value = JSON.parse('{"s":"\\ud800"}') as object;
  rememberJsonText(value, '{"s":"\ud800"}', 1);
  t.equal(takeJsonText(value), undefined);
  const escaped = JSON.parse('{"s":"\\ud800"}') as object;
  rememberJsonText(escaped, '{"s":"\\ud800"}', 1);
  t.same(takeJsonText(escaped), { text: '{"s":"\\ud800"}', maxDepth: 1 }, 'escaped, it is kept');
});

t.test("a parsed step's context carries its text into the head's encoding", async (t) => {
  const rest = {
    state: 'on',
    tags: [],
    done: false,
    changed: true,
    pendingTimers: [],
    runningChildren: [],
    persistentSpawns: [],
    outboundSends: [],
    transitions: 1,
  };
  const contextText = '{"count":3,  "note":"é"}';
  const raw = splitStep(`${JSON.stringify(rest)}\n${contextText}\n{"xstate":5}`, 0) as NonNullable<ReturnType<typeof splitStep>>;
  const unchecked = parseStep(raw);
  t.equal(
    stringifyWithKnownField(head(2, { context: unchecked.context }), 'context').spliced,
    undefined,
    'not checked by a sandbox: not kept',
  );
  const step = parseStep({ ...raw, maxDepth: 200 });
  t.same(step.context, { count: 3, note: 'é' });
  const { text, spliced } = stringifyWithKnownField(head(2, { context: step.context }), 'context');
  t.equal(spliced?.maxDepth, 200, 'with the depth the sandbox checked');
  t.ok(text.endsWith(`"context":${contextText}}`), text);
  t.same(JSON.parse(text), head(2, { context: { count: 3, note: 'é' } }));
});

t.test("a TX log entry's head takes its context's text; the entry reads back the same", async (t) => {
  const context = { count: 7 };
  rememberJsonText(context, '{"count": 7}', 1);
  const entry: LogEntry = { kind: 'commit', head: head(7, { context }), previousSeq: 6, history: [record(7)], effects: {}, after: 41 };
  const text = entryText(entry);
  t.ok(text.includes('"context":{"count": 7}'), 'the remembered text, as it was');
  t.equal(
    stringifyWithKnownField({ ...entry.head, logSeq: 50 }, 'context').spliced?.maxDepth,
    1,
    "kept for the writer's local copy, which commits the same head next",
  );
  t.equal(stringifyWithKnownField(entry.head, 'context').spliced, undefined, 'and taken by it');
  const message = { json: () => JSON.parse(text) as unknown, headers: undefined } as unknown as FollowedMessage;
  t.same(entryOf(message), entry, 'the same entry');
  const fence: LogEntry = { kind: 'fence', orgId: 'o', machine: 'm', name: 'i', requestId: 'r', by: 'n1', after: 3 };
  t.equal(entryText(fence), JSON.stringify(fence), 'an entry without a head: JSON.stringify');
});

t.test('the log frame holds the remembered text; the head reads back the same from the log and from LMDB', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const context = { n: 2, items: ['a', 'b'] };
  const contextText = '{"n":2, "items":["a","b"]}';
  {
    // LMDB gets nothing from the log while it is open: the reopen below reads the head from the log.
    const store = openLmdbNodeStore(dir, { walApplyDelayMs: 600_000 });
    t.equal(await store.instances.createInstance(head(1), [record(1)]), true);
    rememberJsonText(context, contextText, 2);
    await store.instances.commit(head(2, { context }), head(1), [record(2)]);
    t.same(store.instances.getInstance('org_a', 'm', 'i')?.context, context, 'read before LMDB has it');
    const frames = WriteAheadLog.read(join(dir, 'wal'));
    t.ok(
      frames.some((frame) => frame.payload.toString('utf8').includes(contextText)),
      'the frame holds the text the step gave',
    );
    await store.close();
  }
  const reopened = openLmdbNodeStore(dir);
  t.teardown(() => reopened.close());
  t.same(reopened.instances.getInstance('org_a', 'm', 'i'), head(2, { context }), 'after a restart that applied the log');
  t.same(
    reopened.instances.listTransitions('org_a', 'm', 'i', 0, 10).map((r) => Object.keys(r).sort()),
    [
      ['createdAt', 'event', 'seq', 'state', 'ts'],
      ['createdAt', 'event', 'seq', 'state', 'ts'],
    ],
    'history records hold no context',
  );
});

t.test('a commit does not scan a context the sandbox checked, and still refuses a head too deep to encode', async (t) => {
  const { commitTexts } = await import('../src/store/lmdb/wal-commits.js');
  const shallow = { n: 1 };
  rememberJsonText(shallow, '{"n":1}', 200);
  t.ok(commitTexts(head(2, { context: shallow }), [record(2)]), 'checked to 200 levels: taken by the log');
  const claimed = { n: 1 };
  rememberJsonText(claimed, '{"n":1}', 998);
  t.equal(commitTexts(head(2, { context: claimed }), [record(2)]), undefined, 'a bound past what can be encoded: not taken by the log');
  let deep: unknown = 1;
  for (let i = 0; i < 1_000; i++) deep = [deep];
  const context = { n: 2 };
  rememberJsonText(context, '{"n":2}', 1);
  t.equal(commitTexts(head(2, { context, state: { a: deep } as never }), [record(2)]), undefined, 'the rest of the head is still scanned');
});

t.test("a real isolate's step hands the node its context's text, with the depth the sandbox checked", async (t) => {
  const { VersionIsolate } = await import('../src/sandbox/index.js');
  const { importing } = await import('./fixtures/sandbox/bundles.js');
  const { MAX_STATE_DEPTH } = await import('../src/domain/json-depth.js');
  const vi = await VersionIsolate.load({
    versionId: 'ver-json-texts',
    code: importing(`export default createMachine({ id: 'c', initial: 'on', predictableActionArguments: true, context: { n: 0, lines: [] },
  states: { on: { on: { ADD: { actions: assign({ n: (c) => c.n + 1, lines: (c, e) => [...c.lines, e.line] }) } } } } });`),
  });
  t.teardown(() => vi.dispose());
  vi.start('i', { context: {} });
  const step = vi.send('i', { type: 'ADD', line: { sku: 'a', qty: 2 } });
  t.same(step.context, { n: 1, lines: [{ sku: 'a', qty: 2 }] });
  const { text, spliced } = stringifyWithKnownField(head(2, { context: step.context }), 'context');
  t.equal(spliced?.maxDepth, MAX_STATE_DEPTH, 'the text is kept, with the bound the sandbox checked');
  t.same(JSON.parse(text), head(2, { context: { n: 1, lines: [{ sku: 'a', qty: 2 }] } }));
});
