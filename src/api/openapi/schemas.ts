import { errorCodes, oauthErrorCodes } from '../../domain/errors.js';
import { indexOps } from '../../domain/index-values.js';
import { signingAlgorithms } from '../../domain/records.js';
import { allScopes } from '../../domain/scopes.js';

/** A JSON Schema (2020-12, as OpenAPI 3.1 has it), written as a plain object. */
export type JsonSchema = { [keyword: string]: unknown };

/** A reference to one of the shared schemas below. */
export const ref = (name: keyof typeof sharedSchemas): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

const SLUG_PATTERN = '^[a-zA-Z0-9_-]{1,128}$';
const prettyIdPattern = (prefix: string) => `^${prefix}_[A-Za-z0-9_-]{22}$`;
const dateTime: JsonSchema = { type: 'string', format: 'date-time' };

export const objectOf = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema => ({
  type: 'object',
  properties,
  ...(required.length > 0 ? { required } : {}),
});

/** A page of a list (wire-protocol §1.5): its items under `field`, and `cursor` while more follow. */
export const pageOf = (field: string, item: JsonSchema): JsonSchema =>
  objectOf({ [field]: { type: 'array', items: item }, cursor: ref('Cursor') }, [field]);

/** The schemas several routes share (wire-protocol §5), under components.schemas. */
export const sharedSchemas = {
  ErrorCode: {
    type: 'string',
    enum: [...errorCodes],
    description: 'What went wrong, for programs (the State Backed client dispatches on it, wire-protocol §1.4).',
  },
  Error: {
    ...objectOf(
      {
        error: { type: 'string', description: 'What went wrong, for people.' },
        code: { $ref: '#/components/schemas/ErrorCode' },
        parameter: { type: 'string', description: 'With invalid-parameter: the parameter, header or body field at fault.' },
      },
      ['error', 'code'],
    ),
    description: 'Every error answer: `{error, code, parameter?}` (wire-protocol §1.4).',
  },
  OAuthError: {
    ...objectOf(
      {
        error: { type: 'string', enum: [...oauthErrorCodes] },
        error_description: { type: 'string' },
        code: { type: 'string', enum: [...oauthErrorCodes] },
      },
      ['error', 'error_description', 'code'],
    ),
    description: 'A refused token exchange, the OAuth way (RFC 6749 §5.2), with `code` the same as `error`.',
  },
  Cursor: { type: 'string', description: 'Opaque; present while more pages follow (wire-protocol §1.5).' },
  Slug: { type: 'string', pattern: SLUG_PATTERN },
  OrgId: { type: 'string', pattern: prettyIdPattern('org') },
  KeyId: { type: 'string', pattern: prettyIdPattern('sbk') },
  MachineVersionId: { type: 'string', pattern: prettyIdPattern('ver') },
  Scope: { type: 'string', enum: [...allScopes] },
  SigningAlgorithm: { type: 'string', enum: [...signingAlgorithms] },
  IndexOp: { type: 'string', enum: [...indexOps] },
  StateValue: {
    description: 'XState state value: a state name, or an object of parent state to child value (wire-protocol §5).',
    oneOf: [{ type: 'string' }, { type: 'object', additionalProperties: { $ref: '#/components/schemas/StateValue' } }],
  },
  State: objectOf(
    {
      state: { $ref: '#/components/schemas/StateValue' },
      publicContext: { type: 'object', description: "The context's `public` member, when it has one." },
      tags: { type: 'array', items: { type: 'string' } },
      done: { type: 'boolean' },
      ts: { type: 'number', description: 'When the state was committed, epoch milliseconds; grows per instance.' },
    },
    ['state', 'tags', 'done', 'ts'],
  ),
  Event: {
    description: 'An event: its type alone, or an object with a type.',
    oneOf: [{ type: 'string', minLength: 1 }, objectOf({ type: { type: 'string', minLength: 1 } }, ['type'])],
  },
  MachineVersionInfo: objectOf(
    { id: { $ref: '#/components/schemas/MachineVersionId' }, createdAt: dateTime, clientInfo: { type: 'string' } },
    ['id', 'createdAt', 'clientInfo'],
  ),
  ProvisionalCreation: {
    type: 'object',
    description:
      'The signed id (machineVersionId or machineVersionMigrationId) to finalize with, and where to POST the code (multipart/form-data with these fields and a file part named "file").',
    properties: {
      machineVersionId: { type: 'string' },
      machineVersionMigrationId: { type: 'string' },
      codeUploadUrl: { type: 'string', format: 'uri' },
      codeUploadFields: objectOf({ token: { type: 'string' } }, ['token']),
    },
    required: ['codeUploadUrl', 'codeUploadFields'],
  },
  DeletionConfirmation: objectOf({ dangerDataWillBeDeletedForever: { const: true } }, ['dangerDataWillBeDeletedForever']),
  Org: objectOf(
    {
      id: { $ref: '#/components/schemas/OrgId' },
      name: { type: 'string' },
      role: { type: 'string', enum: ['admin', 'read'] },
      createdAt: dateTime,
      allowAnonymousAccess: { type: 'boolean' },
      limits: objectOf({ monthlyEventsLimit: { type: 'number' }, monthlyReadsLimit: { type: 'number' } }),
    },
    ['id', 'name', 'role', 'createdAt', 'allowAnonymousAccess', 'limits'],
  ),
  Mapping: { type: 'object', description: 'A claim mapping: `.$` keys are JSONPath into the claims (wire-protocol §4.3).' },
} satisfies Record<string, JsonSchema>;

export { dateTime, SLUG_PATTERN };
