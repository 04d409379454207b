import { JetStreamApiError, type JetStreamManager, type StoredMsg } from '@nats-io/jetstream';
import t from 'tap';
import { firstMessageFrom, leaderMessage } from '../src/store/jetstream/stream-gets.js';

/**
 * Gets of a stream's messages, alone: a JetStreamManager whose getMessage answers as the servers of a
 * cluster do after a heal (one that sees no meta leader answers "temporarily unavailable" first).
 */
const apiError = (err_code: number, code: number, description: string) => new JetStreamApiError({ err_code, code, description });
const unavailable = () => apiError(10008, 503, 'JetStream system temporarily unavailable');
const message = { seq: 7 } as StoredMsg;
const answering = (...answers: Array<Error | StoredMsg>) => {
  let asked = 0;
  const jsm = {
    streams: {
      getMessage: async () => {
        const answer = answers[Math.min(asked++, answers.length - 1)] as Error | StoredMsg;
        if (answer instanceof Error) throw answer;
        return answer;
      },
    },
  } as unknown as JetStreamManager;
  return { jsm, asked: () => asked };
};

t.test('a get answered "temporarily unavailable" is asked again, and the leader answer taken', async (t) => {
  const { jsm, asked } = answering(unavailable(), unavailable(), message);
  t.equal(await leaderMessage(jsm, 'S', { seq: 7 }), message);
  t.equal(asked(), 3);
});

t.test('it gives up after five more tries (1.55 s of waits), with the error', async (t) => {
  const { jsm, asked } = answering(unavailable());
  const started = Date.now();
  await t.rejects(leaderMessage(jsm, 'S', { seq: 7 }), { code: 10008 });
  t.equal(asked(), 6);
  t.ok(Date.now() - started >= 1_500, 'after the waits');
});

t.test('other errors are not asked again: a missing message is null to firstMessageFrom', async (t) => {
  const missing = answering(apiError(10037, 404, 'no message found'));
  t.equal(await firstMessageFrom(missing.jsm, 'S', 1, 'a.>'), null);
  t.equal(missing.asked(), 1);
  const other = answering(apiError(10059, 404, 'stream not found'), message);
  await t.rejects(leaderMessage(other.jsm, 'S', { seq: 1 }), { code: 10059 });
  t.equal(other.asked(), 1);
});
