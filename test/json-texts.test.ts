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
  t.equal(stringifyWithKnownField(plain, 'context'), JSON.stringify(plain), 'nothing remembered: JSON.stringify');

  const context = { b: [1, 'two'] };
  // Spaced as no JSON.stringify would: the text in the output can only be this one.
  rememberJsonText(context, '{ "b" : [1, "two"] }');
  const withText = { a: 1, context, z: null };
  const spliced = stringifyWithKnownField(withText, 'context');
  t.equal(spliced, '{"a":1,"z":null,"context":{ "b" : [1, "two"] }}');
  t.same(JSON.parse(spliced), withText, 'the same value');
  t.equal(stringifyWithKnownField(withText, 'context'), JSON.stringify(withText), 'taken once: the next encoding is a plain one');

  const alone = { k: 1 };
  rememberJsonText(alone, '{"k":1}');
  t.equal(stringifyWithKnownField({ context: alone }, 'context'), '{"context":{"k":1}}', 'the only field');
});

t.test('a text with a lone surrogate is not kept (as UTF-8 it would not read back as its value)', async (t) => {
  const value = JSON.parse('{"s":"\\ud800"}') as object;
  rememberJsonText(value, '{"s":"\ud800"}');
  t.equal(takeJsonText(value), undefined);
  const escaped = JSON.parse('{"s":"\\ud800"}') as object;
  rememberJsonText(escaped, '{"s":"\\ud800"}');
  t.equal(takeJsonText(escaped), '{"s":"\\ud800"}', 'escaped, it is kept');
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
  const step = parseStep(
    splitStep(`${JSON.stringify(rest)}\n${contextText}\n{"xstate":5}`, 0) as NonNullable<ReturnType<typeof splitStep>>,
  );
  t.same(step.context, { count: 3, note: 'é' });
  const text = stringifyWithKnownField(head(2, { context: step.context }), 'context');
  t.ok(text.endsWith(`"context":${contextText}}`), text);
  t.same(JSON.parse(text), head(2, { context: { count: 3, note: 'é' } }));
});

t.test("a TX log entry's head takes its context's text; the entry reads back the same", async (t) => {
  const context = { count: 7 };
  rememberJsonText(context, '{"count": 7}');
  const entry: LogEntry = { kind: 'commit', head: head(7, { context }), previousSeq: 6, history: [record(7)], effects: {}, after: 41 };
  const text = entryText(entry);
  t.ok(text.includes('"context":{"count": 7}'), 'the remembered text, as it was');
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
    rememberJsonText(context, contextText);
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
