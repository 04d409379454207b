/**
 * A partition copy whose follower reads the stream entry by entry (no consumer to be had) and one of
 * whose applies fails: the entry is delivered again, whatever read was in flight when it failed. A read
 * under way then was handed on, and moved the follower past the failed entry (its rewind lost): the
 * copy's position passed an entry it never applied (a partition probe's helper, with a fake client).
 * No NATS here: a JetStream client that has no consumer and answers each read after a few milliseconds.
 */
import t from 'tap';
import type { JetStreamClient } from '@nats-io/jetstream';
import { PartitionCopy } from '../src/store/jetstream/partition-copy.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

t.test("an entry whose apply failed while the next was being read is delivered again, and the copy's position waits for it", async (t) => {
  const stored = Array.from({ length: 11 }, (_, i) => 10 + i);
  const js = {
    consumers: {
      get: async () => {
        await sleep(2);
        throw new Error('JetStream system temporarily unavailable');
      },
    },
    jetstreamManager: async () => ({
      streams: {
        getMessage: async (_stream: string, query: { seq: number }) => {
          await sleep(5);
          const seq = stored.find((s) => s >= query.seq);
          if (seq === undefined) throw new Error('no message');
          return { seq, subject: `s.tx.7.o.m.i${seq}`, header: undefined, json: () => ({}) };
        },
      },
    }),
  } as unknown as JetStreamClient;
  const delivered: number[] = [];
  let failed = false;
  const copy = new PartitionCopy({
    partition: 7,
    js,
    stream: 'S',
    filter: 's.tx.7.>',
    from: 10,
    lastSeq: async () => 20,
    apply: async (message) => {
      delivered.push(message.seq);
      await sleep(3);
      if (message.seq === 10 && !failed) {
        failed = true;
        throw new Error('could not read the entry it names (JetStream system temporarily unavailable)');
      }
    },
    onError: () => undefined,
  });
  t.teardown(() => Promise.race([copy.stop(), sleep(500)]));
  for (let i = 0; i < 300 && copy.appliedSeq < 20; i++) await sleep(10);
  t.equal(delivered.filter((seq) => seq === 10).length, 2, 'entry 10 was delivered again after its failure');
  t.equal(copy.appliedSeq, 20, 'and the copy reached the end');
});
