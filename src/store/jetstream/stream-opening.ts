import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/**
 * How long a node starting waits for the answer to each question that looks up or makes one of the
 * cluster's streams. Nodes started together make the same streams at once, and a 2.9 server left one
 * such question unanswered in about one cluster start of eight here (measured: a node then waited out
 * the client's 5 s timeout, and the cluster served after 7 s instead of 3). The caller asks again
 * (untilJetStream in bin/cluster-node.ts); making a stream that is there with the same settings is
 * answered with it, so asking again is safe. Long enough for a busy host's JetStream to make an R3
 * stream; the logs' own questions later keep the client's default.
 */
export const STREAM_OPEN_TIMEOUT_MS = 2_000;

/**
 * A JetStream manager for the questions a node asks while it opens the cluster's streams. It does not
 * ask whether JetStream is there (`checkAPI`): the caller's own manager, made first, did.
 */
export const openingManager = (nc: NatsConnection): Promise<JetStreamManager> =>
  jetstreamManager(nc, { timeout: STREAM_OPEN_TIMEOUT_MS, checkAPI: false });
