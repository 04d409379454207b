import { requireDeletionConfirmation } from '../../domain/confirmation.js';
import { decodeStringCursor } from '../../domain/cursor.js';
import { conflict, invalidParameter, notFound } from '../../domain/errors.js';
import { limits } from '../../domain/limits.js';
import { isSlug, requireSlug } from '../../domain/names.js';
import type { MachineRecord } from '../../domain/records.js';
import { type ApiContext, callerInOrg } from '../api-context.js';
import { json, jsonBody, noContent } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';
import { versionInfo } from './version-routes.js';

/** Machine definitions: list, create, read, delete (wire-protocol §3.1). */
export const registerMachineRoutes = (router: Router, context: ApiContext): void => {
  const { catalog } = context;
  /** `currentVersion` when the machine has one (wire-protocol §3.1). */
  const currentVersion = (machine: MachineRecord) => {
    const version = machine.currentVersionId
      ? context.versions.getVersion(machine.orgId, machine.slug, machine.currentVersionId)
      : undefined;
    return version ? { currentVersion: versionInfo(version) } : {};
  };

  router.add('GET', '/machines', (request) => {
    const { orgId } = callerInOrg(context, request, 'machines.read');
    const after = decodeStringCursor(request.query.get('cursor'));
    const pageSize = context.settings.pageSize;
    const { items, cursor } = pageOf(catalog.listMachines(orgId, after, pageSize + 1), pageSize, (last) => last.slug);
    return json({
      machines: items.map((machine) => ({ slug: machine.slug, createdAt: machine.createdAt, ...currentVersion(machine) })),
      cursor,
    });
  });

  router.add('POST', '/machines', async (request) => {
    const { orgId } = callerInOrg(context, request, 'machines.write');
    const body = jsonBody(request);
    const slug = requireSlug(body.slug, 'slug');
    const indexes = requestedIndexes(body.indexes);
    const machine: MachineRecord = { orgId, slug, createdAt: new Date().toISOString(), indexes };
    if (!(await catalog.createMachine(machine))) throw conflict(`machine ${slug} already exists`);
    return noContent(201);
  });

  router.add('GET', '/machines/:machine', (request) => {
    const { orgId } = callerInOrg(context, request, 'machines.read');
    const machine = catalog.getMachine(orgId, request.params.machine as string);
    if (!machine) throw notFound(`machine ${request.params.machine} does not exist`);
    return json({ machine: { createdAt: machine.createdAt, ...currentVersion(machine), indexes: machine.indexes } });
  });

  router.add('DELETE', '/machines/:machine', async (request) => {
    const { orgId } = callerInOrg(context, request, 'machines.admin');
    const slug = request.params.machine as string;
    requireDeletionConfirmation(jsonBody(request), slug, slug, 'hmacSha256OfMachineNameWithMachineNameKey', 'machine');
    if (!catalog.getMachine(orgId, slug)) throw notFound(`machine ${slug} does not exist`);
    // No instance of it may be created meanwhile: one in progress is not stored yet.
    await context.writes.whileDeletingMachine(orgId, slug, async () => {
      // (on a cluster node: asked of the owners of every partition)
      if (await context.reads.hasInstances(orgId, slug)) throw conflict(`machine ${slug} still has instances: delete them first`);
      // Versions first: a crash in between leaves a machine without versions, never versions that a
      // machine created later under the same name would inherit.
      const removed = await context.versions.deleteMachineVersions(orgId, slug);
      await catalog.deleteMachine(orgId, slug);
      context.runtime.unloadVersions(removed);
    });
    return noContent(204);
  });
};

const requestedIndexes = (indexes: unknown): string[] => {
  if (indexes === undefined || indexes === null) return [];
  if (!Array.isArray(indexes) || !indexes.every(isSlug)) {
    throw invalidParameter('indexes', 'indexes must be an array of names of 1 to 128 characters of A-Z, a-z, 0-9, _ and -');
  }
  if (indexes.length > limits.maxIndexesPerMachine)
    throw invalidParameter('indexes', `a machine may declare at most ${limits.maxIndexesPerMachine} indexes`);
  if (new Set(indexes).size !== indexes.length) throw invalidParameter('indexes', 'indexes must not repeat a name');
  // A version names its selectors in a JSON object, where a key __proto__ is refused (http-types.ts).
  if (indexes.includes('__proto__'))
    throw invalidParameter('indexes', 'an index may not be named __proto__: no version could give it a selector');
  return indexes;
};
