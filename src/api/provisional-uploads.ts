/**
 * What machine versions (routes/version-routes.ts, wire-protocol §3.2) and their migrations
 * (routes/migration-routes.ts, §3.3) share of their creation in three steps: the provisional creation
 * signs an id and an upload token; the code upload (routes/upload-routes.ts) keeps the code as a
 * pending upload; the finalization checks the signed id and takes the uploaded code.
 */
import type { UploadClaims } from '../auth/upload-signer.js';
import { invalidParameter, unauthorized } from '../domain/errors.js';
import type { ApiContext } from './api-context.js';
import { type ApiRequest, type ApiResponse, json } from './http-types.js';
import { requestBase } from './request-base.js';
import { CODE_UPLOAD_PATH, UPLOAD_TOKEN_FIELD } from './routes/upload-routes.js';

type Kind = 'version' | 'migration';

/**
 * How the API names a kind's signed id: the field the provisional creation returns it in, the
 * parameter it comes back as, and what is created (`notAnUploadToken`: a version's finalization
 * also says the token it got is no upload token).
 */
const NAMES = {
  version: { returned: 'machineVersionId', parameter: 'signedMachineVersionId', what: 'version', notAnUploadToken: true },
  migration: {
    returned: 'machineVersionMigrationId',
    parameter: 'signedMachineVersionMigrationId',
    what: 'migration',
    notAnUploadToken: false,
  },
} as const;

/** `?gzip` with an empty value, `true` or `1` turns gzip on (wire-protocol §3.2). */
export const gzipFlag = (value: string | null): boolean => {
  if (value === null) return false;
  const normalized = value.trim().toLowerCase();
  if (normalized === '' || normalized === 'true' || normalized === '1') return true;
  if (normalized === 'false' || normalized === '0') return false;
  throw invalidParameter('gzip', 'gzip must be empty, true, 1, false or 0');
};

/** The provisional creation's answer: the signed id, and where and with which token the code is uploaded. */
export const provisionalCreation = (
  context: ApiContext,
  request: ApiRequest,
  kind: Kind,
  base: { orgId: string; machine: string; id: string; gzip: boolean },
): ApiResponse => {
  const now = Date.now();
  return json({
    [NAMES[kind].returned]: context.uploadSigner.sign({ ...base, kind }, now),
    codeUploadUrl: `${requestBase(context, request)}${CODE_UPLOAD_PATH}`,
    codeUploadFields: { [UPLOAD_TOKEN_FIELD]: context.uploadSigner.sign({ ...base, kind: `${kind}-upload` }, now) },
  });
};

/**
 * The claims of a signed id of `kind`. Not signed by this node (or mangled): 403. Signed, but for
 * another org or machine, or of another kind (an upload token): 400 naming the signed id's parameter.
 * Expiry is reported, not thrown, so a repeated finalize of one that exists still succeeds.
 */
export const provisionalClaims = (
  context: ApiContext,
  kind: Kind,
  token: string,
  orgId: string,
  machine: string,
): { claims: UploadClaims; expired: boolean } => {
  const { returned, parameter, notAnUploadToken } = NAMES[kind];
  const check = context.uploadSigner.verify(token);
  if (!check.ok && check.reason !== 'expired') {
    throw unauthorized(`${parameter} is not one this service signed: use the ${returned} the provisional creation returned`);
  }
  const claims = check.claims as UploadClaims;
  if (claims.kind !== kind) {
    throw invalidParameter(
      parameter,
      `${parameter} must be the ${returned} the provisional creation returned${notAnUploadToken ? ', not an upload token' : ''}`,
    );
  }
  if (claims.orgId !== orgId || claims.machine !== machine) {
    throw invalidParameter(parameter, `${parameter} was issued for another machine, not ${machine}`);
  }
  return { claims, expired: !check.ok };
};

/** The code uploaded for the provisional `kind` stored as `uploadId`; 400 naming the signed id when there is none. */
export const uploadedCode = (context: ApiContext, kind: Kind, orgId: string, machine: string, uploadId: string): string => {
  const upload = context.versions.getPendingUpload(orgId, uploadId);
  if (!upload || upload.machine !== machine) {
    throw invalidParameter(
      NAMES[kind].parameter,
      `no code was uploaded for this ${NAMES[kind].what}: POST it to codeUploadUrl with codeUploadFields first`,
    );
  }
  return upload.code;
};
