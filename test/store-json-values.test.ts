/**
 * What the LMDB stores keep of a machine's values is what the instance showed: every JSON value, also
 * the ones MessagePack does not carry (an own key `__proto__`, which msgpackr's decode renames
 * `__proto_`; a string with a lone surrogate, which comes back as U+FFFD). Heads and histories were
 * written as msgpack by a crash's replay of the write-ahead log and by every direct write (a status
 * change, a commit that sends a message), outbox messages and machine logs always: the context a user
 * saw changed after a kill -9, or after a pause and a reload.
 */
import t, { type Test } from 'tap';
import type { JsonObject } from '../src/domain/machine-state.js';
import type { OutboxMessage } from '../src/store/instance-store.js';
import { openLmdbNodeStore } from '../src/store/lmdb/lmdb-node-store.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';
import { instanceHead as head, transitionRecord as record } from './helpers/store-records.js';
import { runScript } from './helpers/wal.js';

/** A context as machine code makes it (`{ ...c, [e.key]: e.value }`), parsed from JSON as a request's. */
const odd = (): JsonObject => JSON.parse('{"__proto__":{"polluted":true},"lone":"a\\ud800b","pair":"\\ud83d\\ude00","n":1}');

const checkOdd = (t: Test, value: unknown, what: string): void => {
  const object = value as Record<string, unknown>;
  t.ok(object && Object.prototype.hasOwnProperty.call(object, '__proto__'), `${what}: the own key __proto__ is kept`);
  t.notOk(object && Object.prototype.hasOwnProperty.call(object, '__proto_'), `${what}: not renamed`);
  t.equal(JSON.stringify(value), JSON.stringify(odd()), `${what}: every value as it was`);
};

t.test('a kill -9 before LMDB took the log: the replay keeps every JSON value', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const crashed = runScript(
    `import { openLmdbNodeStore } from './dist/store/lmdb/lmdb-node-store.js';
      import { instanceHead as head, transitionRecord as record } from './dist-test/test/helpers/store-records.js';
      const odd = JSON.parse(${JSON.stringify(JSON.stringify(odd()))});
      const store = openLmdbNodeStore(${JSON.stringify(dir)}, { walApplyDelayMs: 600000 });
      await store.instances.createInstance(head(1, { context: odd }), [{ ...record(1), event: { type: 'SET', ...odd } }]);
      process.kill(process.pid, 'SIGKILL');`,
  );
  t.equal(crashed.signal, 'SIGKILL', `the writer was killed (${crashed.stderr})`);
  const store = openLmdbNodeStore(dir);
  t.teardown(() => store.close());
  checkOdd(t, store.instances.getInstance('org_a', 'm', 'i')?.context, 'the head');
  const [first] = store.instances.listTransitions('org_a', 'm', 'i', 0, 10);
  const { type, ...payload } = (first?.event ?? {}) as Record<string, unknown>;
  t.equal(type, 'SET');
  checkOdd(t, payload, "the history's event");
});

t.test('direct writes to LMDB (a head replaced, an outbox message, a log line) keep every JSON value', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  let store = openLmdbNodeStore(dir);
  await store.instances.createInstance(head(1), [record(1)]);
  await store.instances.caughtUp();
  // a status change: the head is written straight to LMDB
  await store.instances.replaceHead(head(1, { context: odd(), status: 'paused' }), head(1));
  const message: OutboxMessage = {
    id: 'msg_1',
    orgId: 'org_a',
    position: [1, 0],
    from: { machine: 'm', name: 'i' },
    to: { machine: 'm', name: 'j' },
    kind: 'send',
    event: { type: 'HELLO', ...odd() },
    attempts: 0,
    nextAttemptAt: 0,
  };
  await store.instances.updateOutbox(message);
  await store.logs.appendLogs([{ orgId: 'org_a', timestamp: 5, level: 'info', machine: 'm', instance: 'i', args: [odd()] }]);
  await store.close();

  store = openLmdbNodeStore(dir);
  t.teardown(() => store.close());
  checkOdd(t, store.instances.getInstance('org_a', 'm', 'i')?.context, 'the replaced head, read after a reopen');
  const { type, ...payload } = (store.instances.listOutbox(10)[0]?.event ?? {}) as Record<string, unknown>;
  t.equal(type, 'HELLO');
  checkOdd(t, payload, "the outbox message's event");
  checkOdd(t, store.logs.listLogs('org_a', 0, 10, 10)[0]?.args[0], 'the log line');
});
