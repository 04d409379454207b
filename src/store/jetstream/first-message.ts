import { JetStreamApiError, type JetStreamManager, type MsgRequest, type NextMsgRequest, type StoredMsg } from '@nats-io/jetstream';

/**
 * A stream's first message at or after stream sequence `seq` on `subject` (wildcards allowed), as its
 * leader answers; null when there is none.
 */
export const firstMessageFrom = async (jsm: JetStreamManager, stream: string, seq: number, subject: string): Promise<StoredMsg | null> => {
  // (the client's type leaves out next_by_subj, which a 2.9 server takes: its first message on the subject from seq on)
  const query: NextMsgRequest = { seq, next_by_subj: subject };
  try {
    return await jsm.streams.getMessage(stream, query as unknown as MsgRequest);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.status === 404) return null;
    throw error;
  }
};
