import { ServiceError } from '../../domain/errors.js';
import type { InstanceUpdate } from '../../runtime/update-bus.js';

/** What a client may send on `/rt` (wire-protocol §6.2). */
export type ClientMessage =
  | { type: 'subscribe-to-instance' | 'unsubscribe-from-instance'; machineName: string; machineInstanceName: string; requestId: string }
  | { type: 'ping' };

/** A frame that is not one of the client messages: answered in-band, the socket stays open. */
export class BadFrame {
  constructor(
    readonly error: ServiceError,
    /** The frame's `requestId` when it had a usable one, so the client can route the error. */
    readonly requestId: string,
  ) {}
}

/** The longest requestId, machine or instance name taken (the client's ids are ≈ 11 characters). */
const MAX_FIELD_CHARS = 256;

const field = (message: Record<string, unknown>, name: string, requestId: string): string => {
  const value = message[name];
  if (typeof value !== 'string' || value === '' || value.length > MAX_FIELD_CHARS) {
    throw new BadFrame(
      new ServiceError(400, 'invalid-parameter', `${name} must be a non-empty string of at most ${MAX_FIELD_CHARS} characters`, name),
      requestId,
    );
  }
  return value;
};

/** Parses one text frame; throws BadFrame for anything else. */
export const parseClientMessage = (text: string): ClientMessage => {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    throw new BadFrame(new ServiceError(400, 'invalid-parameter', 'frames must be JSON text'), '');
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    throw new BadFrame(new ServiceError(400, 'invalid-parameter', 'a frame must be a JSON object with a type'), '');
  }
  const fields = message as Record<string, unknown>;
  const requestId = typeof fields.requestId === 'string' && fields.requestId.length <= MAX_FIELD_CHARS ? fields.requestId : '';
  switch (fields.type) {
    case 'ping':
      return { type: 'ping' };
    case 'subscribe-to-instance':
    case 'unsubscribe-from-instance':
      return {
        type: fields.type,
        requestId: field(fields, 'requestId', requestId),
        machineName: field(fields, 'machineName', requestId),
        machineInstanceName: field(fields, 'machineInstanceName', requestId),
      };
    default:
      throw new BadFrame(
        new ServiceError(400, 'invalid-parameter', 'type must be subscribe-to-instance, unsubscribe-from-instance or ping', 'type'),
        requestId,
      );
  }
};

/** `instance-update` (wire-protocol §6.3): publicContext is always present, `{}` when the context has none. */
export const updateText = (update: Pick<InstanceUpdate, 'machine' | 'name' | 'ts' | 'state' | 'context' | 'tags' | 'done'>): string =>
  JSON.stringify({
    type: 'instance-update',
    machineName: update.machine,
    machineInstanceName: update.name,
    ts: update.ts,
    state: update.state,
    publicContext: Object.prototype.hasOwnProperty.call(update.context, 'public') ? update.context.public : {},
    tags: update.tags,
    done: update.done,
  });

/** `error` (wire-protocol §6.3), with a message for people reading frames (the client ignores it). */
export const errorText = (requestId: string, error: unknown): string => {
  const known = error instanceof ServiceError;
  return JSON.stringify({
    type: 'error',
    requestId,
    status: known ? error.status : 500,
    code: known ? error.code : 'internal',
    message: known ? error.message : 'internal error',
  });
};
