import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { UploadClaims } from '../../auth/upload-signer.js';
import { conflict, invalidParameter, notFound, payloadTooLarge, rateLimited, unauthorized } from '../../domain/errors.js';
import type { ApiContext } from '../api-context.js';
import { parseMultipart } from '../multipart.js';
import { noContent } from '../http-types.js';
import type { Router } from '../router.js';

/** Bundle limits (wire-protocol §8.7): the uploaded file part, and the code once gunzipped. */
const MAX_UPLOAD_BYTES = 1_000_000;
/** The form at most: the file, its fields (16 of 16 KiB) and the parts' headers. Read no further: the route takes no credential. */
const MAX_FORM_BYTES = MAX_UPLOAD_BYTES + 16 * 16 * 1024 + 64 * 1024;
const MAX_CODE_BYTES = 10_000_000;

/** Path of the code upload endpoint; `codeUploadUrl` is the public URL plus this. */
export const CODE_UPLOAD_PATH = '/uploads/code';
/** The one form field the provisional step hands out (`codeUploadFields`). */
export const UPLOAD_TOKEN_FIELD = 'token';

const gunzipAsync = promisify(gunzip);

/**
 * `POST /uploads/code`: where the client's `uploadCode` posts a provisional version's bundle
 * or a provisional migration's (wire-protocol §3.2, §3.3). It carries no credential: the signed `token` field is the authority. The code
 * is kept as the version's pending upload (a re-upload replaces it) until finalization.
 */
export const registerUploadRoutes = (router: Router, context: ApiContext): void => {
  router.add(
    'POST',
    CODE_UPLOAD_PATH,
    async (request) => {
      const form = await parseMultipart(request.body, request.headers['content-type'], {
        maxFileBytes: MAX_UPLOAD_BYTES + 1,
        maxFiles: 1,
        maxFields: 16,
        maxFieldBytes: 16 * 1024,
      });
      const claims = verifiedUploadClaims(context, form.fields.get(UPLOAD_TOKEN_FIELD));
      const file = form.files[0];
      if (!file || file.field !== 'file') throw invalidParameter('file', 'the upload needs the code as a file part named "file"');
      if (file.truncated || file.data.length > MAX_UPLOAD_BYTES)
        throw payloadTooLarge(`the uploaded code exceeds ${MAX_UPLOAD_BYTES} bytes (the limit applies to the gzipped bytes when gzipped)`);

      const encoding = form.fields.get('content-encoding')?.at(-1)?.trim().toLowerCase();
      if (encoding !== undefined && encoding !== '' && encoding !== 'gzip' && encoding !== 'identity') {
        throw invalidParameter('content-encoding', `content-encoding must be gzip when given, not ${encoding}`);
      }
      const gzipped = claims.gzip || encoding === 'gzip';
      const bytes = gzipped ? await gunzipBounded(file.data) : file.data;
      const code = decodeUtf8(bytes);

      if (!context.catalog.getMachine(claims.orgId, claims.machine)) throw notFound(`machine ${claims.machine} does not exist`);
      checkNotFinalized(context, claims);
      checkPendingRoom(context, claims.orgId, pendingUploadId(claims), code.length);
      await context.versions.putPendingUpload({
        orgId: claims.orgId,
        machine: claims.machine,
        versionId: pendingUploadId(claims),
        code,
        expiresAt: claims.expiresAt * 1000,
      });
      context.versions.sweepExpiredPendingUploads(Date.now()).catch((error: unknown) => {
        context.logger.warn('sweeping expired pending uploads failed', { error: String(error) });
      });
      return noContent(204);
    },
    { maxBodyBytes: MAX_FORM_BYTES },
  );
};

/**
 * An org's uploads not finalized yet, at most: each is kept for up to an hour, and up to 10 MB of code
 * can come from 10 KB of gzip, so without a bound a few MB of requests could fill the node's disk
 * (which then refuses every org's writes). The code is what is bounded; the count is far above what a
 * deploy pipeline leaves behind (each bundle refused at finalization stays until it expires). A
 * re-upload for the same version replaces its earlier one.
 */
const MAX_PENDING_UPLOADS_PER_ORG = 100;
const MAX_PENDING_CHARS_PER_ORG = 50_000_000;

const checkPendingRoom = (context: ApiContext, orgId: string, id: string, chars: number): void => {
  const others = context.versions.pendingUploadsOf(orgId, Date.now()).filter((pending) => pending.versionId !== id);
  const held = others.reduce((sum, pending) => sum + pending.chars, 0);
  if (others.length >= MAX_PENDING_UPLOADS_PER_ORG || held + chars > MAX_PENDING_CHARS_PER_ORG)
    throw rateLimited(
      `the org holds ${others.length} uploaded bundles not finalized yet (${held} characters of code); at most ${MAX_PENDING_UPLOADS_PER_ORG} and ${MAX_PENDING_CHARS_PER_ORG} characters are kept: finalize them, or upload again once they expire (an hour after their provisional creation)`,
    );
};

/**
 * A version or migration already finalized keeps the code it was finalized with: an upload for it now
 * would be kept and never used, and its uploader told it succeeded. (Checked before the upload is
 * stored; a finalization that lands after the check takes the pending code, which is this upload.)
 */
const checkNotFinalized = (context: ApiContext, claims: UploadClaims): void => {
  const id = pendingUploadId(claims);
  const what = claims.kind === 'version-upload' ? 'version' : 'migration';
  const finalized =
    what === 'version'
      ? context.versions.getVersion(claims.orgId, claims.machine, id)
      : context.versions.getMigration(claims.orgId, claims.machine, id);
  if (finalized)
    throw conflict(
      `this ${what} is already finalized with the code uploaded before: its code cannot change; create a new ${what} to deploy other code`,
    );
};

/**
 * The id a pending upload is stored under: the version's id, or the migration's `mig_` id (a migration
 * token's `id` also carries its two version ids, see migration-routes.ts).
 */
export const pendingUploadId = (claims: UploadClaims): string =>
  claims.kind === 'migration' || claims.kind === 'migration-upload' ? (claims.id.split(':')[0] as string) : claims.id;

const verifiedUploadClaims = (context: ApiContext, values: string[] | undefined): UploadClaims => {
  if (!values || values.length === 0)
    throw invalidParameter(UPLOAD_TOKEN_FIELD, `the upload needs the "${UPLOAD_TOKEN_FIELD}" field from codeUploadFields`);
  if (values.length > 1) throw invalidParameter(UPLOAD_TOKEN_FIELD, `the "${UPLOAD_TOKEN_FIELD}" field must be given once`);
  const check = context.uploadSigner.verify(values[0] as string);
  if (!check.ok) {
    if (check.reason === 'expired') {
      throw unauthorized('the upload token has expired: provisionally create the version again and upload within the time allowed');
    }
    throw unauthorized('the upload token is not one this service signed (were codeUploadFields changed?)');
  }
  if (check.claims.kind !== 'version-upload' && check.claims.kind !== 'migration-upload') {
    throw invalidParameter(
      UPLOAD_TOKEN_FIELD,
      `the "${UPLOAD_TOKEN_FIELD}" field must be the value given in codeUploadFields, not a signed version id`,
    );
  }
  return check.claims;
};

const gunzipBounded = async (data: Buffer): Promise<Buffer> => {
  try {
    return await gunzipAsync(data, { maxOutputLength: MAX_CODE_BYTES });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) {
      throw payloadTooLarge(`the code exceeds ${MAX_CODE_BYTES} bytes once gunzipped`);
    }
    throw invalidParameter('file', `the upload was declared gzipped but is not valid gzip data: ${(error as Error).message}`);
  }
};

const utf8 = new TextDecoder('utf-8', { fatal: true });

const decodeUtf8 = (bytes: Buffer): string => {
  try {
    return utf8.decode(bytes);
  } catch {
    throw invalidParameter('file', 'the uploaded code is not valid UTF-8');
  }
};
