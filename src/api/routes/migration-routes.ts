import type { UploadClaims } from '../../auth/upload-signer.js';
import { invalidParameter, notFound, unauthorized } from '../../domain/errors.js';
import { prettyId } from '../../domain/ids.js';
import type { MachineVersionMigrationRecord } from '../../domain/records.js';
import { type ApiContext, callerInOrg, requireMachine, requireVersionParameter } from '../api-context.js';
import { json, jsonBody } from '../http-types.js';
import type { Router } from '../router.js';
import { gzipFlag, provisionalClaims, provisionalCreation, uploadedCode } from '../provisional-uploads.js';
import { pendingUploadId } from './upload-routes.js';

/**
 * Machine version migrations (wire-protocol §3.3): provisional creation, then the code upload of
 * upload-routes.ts, then finalization; the same three steps as versions (version-routes.ts).
 */
export const registerMigrationRoutes = (router: Router, context: ApiContext): void => {
  const { versions } = context;

  router.add('POST', '/machines/:machine/migrations', (request) => {
    const { orgId } = callerInOrg(context, request, 'machine-versions.write');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const gzip = gzipFlag(request.query.get('gzip'));
    // The 0.1.37 client sends its whole request here, code included: other fields are ignored.
    const body = jsonBody(request);
    const fromVersionId = requireVersionParameter(context, orgId, machine, body.fromMachineVersionId, 'fromMachineVersionId');
    const toVersionId = requireVersionParameter(context, orgId, machine, body.toMachineVersionId, 'toMachineVersionId');
    if (fromVersionId === toVersionId)
      throw invalidParameter('toMachineVersionId', 'toMachineVersionId must differ from fromMachineVersionId');

    // The two version ids ride in the signed id's `id` field (`mig_...:ver_...:ver_...`): the finalize
    // step then needs no stored provisional record, as with versions.
    const id = [prettyId('mig'), fromVersionId, toVersionId].join(':');
    return provisionalCreation(context, request, 'migration', { orgId, machine: machine.slug, id, gzip });
  });

  router.add('PUT', '/machines/:machine/migrations/:signedMigrationId', async (request) => {
    const { orgId } = callerInOrg(context, request, 'machine-versions.write');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const { claims, expired } = provisionalClaims(context, 'migration', request.params.signedMigrationId as string, orgId, machine.slug);
    const { migrationId, fromVersionId, toVersionId } = migrationOf(claims);

    const existing = versions.getMigration(orgId, machine.slug, migrationId);
    if (existing) return finalized(existing.id);
    if (expired)
      throw unauthorized(
        'signedMachineVersionMigrationId has expired: provisionally create the migration again and finalize it within the time allowed',
      );

    const code = uploadedCode(context, 'migration', orgId, machine.slug, pendingUploadId(claims));
    for (const versionId of [fromVersionId, toVersionId]) {
      if (!versions.getVersion(orgId, machine.slug, versionId))
        throw notFound(`machine ${machine.slug} has no version ${versionId} any more`);
    }
    const validation = await context.validateMigrationBundle(code);
    if (!validation.ok) throw invalidParameter('code', `the uploaded code is not a valid migration: ${validation.error}`);

    const record: MachineVersionMigrationRecord = {
      id: migrationId,
      orgId,
      machine: machine.slug,
      fromVersionId,
      toVersionId,
      createdAt: new Date().toISOString(),
    };
    const result = await versions.finalizeMigration(record, code);
    if (result.kind === 'no-machine') throw notFound(`machine ${machine.slug} does not exist`);
    return finalized(result.record.id);
  });
};

/** §3.3: the client 0.1.37 types the answer as `machineVersionId`, the spec as `machineVersionMigrationId`: both. */
const finalized = (id: string) => json({ machineVersionMigrationId: id, machineVersionId: id });

const migrationOf = (claims: UploadClaims): { migrationId: string; fromVersionId: string; toVersionId: string } => {
  const [migrationId, fromVersionId, toVersionId, ...rest] = claims.id.split(':');
  if (!migrationId || !fromVersionId || !toVersionId || rest.length > 0) {
    throw invalidParameter(
      'signedMachineVersionMigrationId',
      'signedMachineVersionMigrationId is not one the provisional creation returned',
    );
  }
  return { migrationId, fromVersionId, toVersionId };
};
