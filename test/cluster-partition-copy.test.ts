import t from 'tap';
import { type JetStreamClient, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ServiceError } from '../src/domain/errors.js';
import { PartitionCopy, PartitionGivenUpError } from '../src/store/jetstream/partition-copy.js';
import { connectTo, natsMissing, startNats } from './helpers/nats.js';

/** A copy whose catch-up asks a log that does not answer (its question fails after `failAfterMs`). */
const unansweredCopy = (failAfterMs: number, errors: string[]): PartitionCopy =>
  new PartitionCopy({
    partition: 7,
    // (never reached: the follower starts only once the log said where the partition ends)
    js: {} as JetStreamClient,
    stream: 'STATEHOLD_c_TX',
    filter: 'statehold.c.tx.7.>',
    from: 1,
    lastSeq: () => new Promise((_, reject) => setTimeout(() => reject(new Error('TimeoutError: timeout')), failAfterMs)),
    apply: async () => undefined,
    onError: (message) => errors.push(message),
  });

t.test("a request waiting for a partition given up while the log does not answer gets a 503, not the log's error", async (t) => {
  for (const [label, failAfterMs, stopAfterMs] of [
    ['given up while the question is out', 50, 0],
    ['given up between two questions', 10, 60],
  ] as const) {
    const errors: string[] = [];
    const copy = unansweredCopy(failAfterMs, errors);
    const waiting = copy.whenReady();
    await new Promise((resolve) => setTimeout(resolve, stopAfterMs));
    await copy.stop();
    const error = await waiting.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    t.ok(error instanceof ServiceError, `${label}: a ServiceError, which the API answers as it says`);
    t.ok(
      error instanceof PartitionGivenUpError,
      `${label}: one the owner's prepare can tell apart (a first copy is then asked of the new owner)`,
    );
    t.match(
      error,
      { status: 503, code: 'unavailable', message: /partition 7 moved to another node.*may or may not have been applied/ },
      label,
    );
    t.notOk(copy.ready, `${label}: never ready`);
  }
});

t.test(
  'a copy given up while its catch-up waits for the log starts no follower: nothing is applied for a partition this node let go',
  { skip: natsMissing() },
  async (t) => {
    // Before: the catch-up started the follower once the log answered, stopped or not, and that follower
    // went on applying the partition's entries after its rows were dropped (a node cut off from NATS
    // took every partition, gave most back on reconnecting, and kept a follower for each): the positions
    // it left made the partition, taken again later, pass by its instances' entries, creates included,
    // and requests for them were answered 404.
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const nc = await connectTo(nats, 'copy');
    t.teardown(() => nc.close());
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'STATEHOLD_c_TX', subjects: ['statehold.c.tx.>'] });
    const js = jetstream(nc);
    await js.publish('statehold.c.tx.7.o.m.a', '{}');
    let answer: (seq: number) => void = () => undefined;
    const applied: number[] = [];
    const copy = new PartitionCopy({
      partition: 7,
      js,
      stream: 'STATEHOLD_c_TX',
      filter: 'statehold.c.tx.7.>',
      from: 1,
      lastSeq: () => new Promise<number>((resolve) => (answer = resolve)),
      apply: async (message) => void applied.push(message.seq),
      onError: () => undefined,
    });
    const waiting = copy.whenReady().catch((reason: unknown) => reason);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await copy.stop();
    answer(1);
    t.ok((await waiting) instanceof PartitionGivenUpError, 'the catch-up ends as given up');
    await js.publish('statehold.c.tx.7.o.m.a', '{}');
    await new Promise((resolve) => setTimeout(resolve, 500));
    t.same(applied, [], 'no entry applied');
    t.same((await jsm.consumers.list('STATEHOLD_c_TX').next()).length, 0, 'no consumer made');
  },
);
