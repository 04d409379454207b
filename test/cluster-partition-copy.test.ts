import t from 'tap';
import type { JetStreamClient } from '@nats-io/jetstream';
import { ServiceError } from '../src/domain/errors.js';
import { PartitionCopy, PartitionGivenUpError } from '../src/store/jetstream/partition-copy.js';

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
