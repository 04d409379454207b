import { JetStreamApiError, type JetStreamManager, type MsgRequest, type NextMsgRequest, type StoredMsg } from '@nats-io/jetstream';

/**
 * JetStream's "system temporarily unavailable". Every server of the cluster takes a message get, and
 * only the stream's leader answers it with the message; but a server that sees no JetStream meta leader,
 * or no leader of the stream's group, answers at once with this error, often ahead of the leader. After
 * a cut route healed, a probe saw most gets fail so for 4 s while the stream had a leader throughout.
 */
const CLUSTER_NOT_AVAILABLE = 10008;
/** The waits before each get asked again after that error (1.55 s in all): the leader's answer usually wins the next race. */
const AGAIN_AFTER_MS = [50, 100, 200, 400, 800];
/** How much longer than one get leaderMessage may take, asking again. */
export const ASKED_AGAIN_FOR_MS = AGAIN_AFTER_MS.reduce((sum, ms) => sum + ms, 0);

/** A stream's message, as its leader answers; asked again a few times while another server answers "temporarily unavailable" first. */
export const leaderMessage = async (jsm: JetStreamManager, stream: string, query: MsgRequest): Promise<StoredMsg | null> => {
  for (let attempt = 0; ; attempt++) {
    try {
      return await jsm.streams.getMessage(stream, query);
    } catch (error) {
      const wait = AGAIN_AFTER_MS[attempt];
      if (!(error instanceof JetStreamApiError && error.code === CLUSTER_NOT_AVAILABLE) || wait === undefined) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
};

/**
 * A stream's first message at or after stream sequence `seq` on `subject` (wildcards allowed), as its
 * leader answers; null when there is none.
 */
export const firstMessageFrom = async (jsm: JetStreamManager, stream: string, seq: number, subject: string): Promise<StoredMsg | null> => {
  // (the client's type leaves out next_by_subj, which a 2.9 server takes: its first message on the subject from seq on)
  const query: NextMsgRequest = { seq, next_by_subj: subject };
  try {
    return await leaderMessage(jsm, stream, query as unknown as MsgRequest);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.status === 404) return null;
    throw error;
  }
};
