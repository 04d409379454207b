import { decodeCursor } from '../../domain/cursor.js';
import { invalidParameter, notFound, unauthorized } from '../../domain/errors.js';
import { isPrettyId, prettyId } from '../../domain/ids.js';
import { clipped } from '../../domain/names.js';
import { selectorProblem } from '../../domain/index-values.js';
import type { MachineRecord, MachineVersionRecord } from '../../domain/records.js';
import type { VersionCursor } from '../../store/version-store.js';
import { type ApiContext, callerInOrg, requireMachine } from '../api-context.js';
import { json, jsonBody } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';
import { gzipFlag, provisionalClaims, provisionalCreation, uploadedCode } from '../provisional-uploads.js';

/** The longest `clientInfo` kept (free text: a git sha, a version tag, a short note). */
const MAX_CLIENT_INFO_CHARS = 4096;
const MAX_SELECTOR_CHARS = 1024;

/** `MachineVersionInfo` (wire-protocol §5). */
export const versionInfo = (record: MachineVersionRecord): { id: string; createdAt: string; clientInfo: string } => ({
  id: record.id,
  createdAt: record.createdAt,
  clientInfo: record.clientInfo,
});

/**
 * Machine versions (wire-protocol §3.2): provisional creation, finalization, listing. The code upload
 * between the first two is in upload-routes.ts.
 */
export const registerVersionRoutes = (router: Router, context: ApiContext): void => {
  const { versions } = context;

  router.add('GET', '/machines/:machine/v', (request) => {
    const { orgId } = callerInOrg(context, request, 'machine-versions.read');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const after = versionCursor(request.query.get('cursor'));
    const pageSize = context.settings.pageSize;
    const { items, cursor } = pageOf(versions.listVersions(orgId, machine.slug, after, pageSize + 1), pageSize, (last) => [
      last.createdAt,
      last.id,
    ]);
    return json({ versions: items.map(versionInfo), cursor });
  });

  // Not part of the State Backed API: what the web console draws a version's statechart from.
  router.add('GET', '/machines/:machine/v/:version/definition', async (request) => {
    const { orgId } = callerInOrg(context, request, 'machine-versions.read');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const versionId = request.params.version as string;
    if (!isPrettyId(versionId, 'ver') || !versions.getVersion(orgId, machine.slug, versionId)) {
      throw notFound(`machine ${machine.slug} has no version ${clipped(versionId)}`);
    }
    return json({ definition: await context.machineDefinition(orgId, machine.slug, versionId) });
  });

  router.add('POST', '/machines/:machine/v', (request) => {
    const { orgId } = callerInOrg(context, request, 'machine-versions.write');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const gzip = gzipFlag(request.query.get('gzip'));
    return provisionalCreation(context, request, 'version', { orgId, machine: machine.slug, id: prettyId('ver'), gzip });
  });

  router.add('PUT', '/machines/:machine/v/:signedMachineVersionId', async (request) => {
    const { orgId } = callerInOrg(context, request, 'machine-versions.write');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const body = jsonBody(request);
    const clientInfo = optionalClientInfo(body.clientInfo);
    const makeCurrent = optionalBoolean(body.makeCurrent, 'makeCurrent');
    const givenSelectors = optionalSelectors(body.indexSelectors, machine);

    const { claims, expired } = provisionalClaims(context, 'version', request.params.signedMachineVersionId as string, orgId, machine.slug);
    const existing = versions.getVersion(orgId, machine.slug, claims.id);
    if (existing) return json({ machineVersionId: existing.id });
    if (expired)
      throw unauthorized(
        'signedMachineVersionId has expired: provisionally create the version again and finalize it within the time allowed',
      );

    const code = uploadedCode(context, 'version', orgId, machine.slug, claims.id);
    const validation = await context.validateBundle(code);
    if (!validation.ok) throw invalidParameter('code', `the uploaded code is not a valid machine version: ${validation.error}`);

    const current = machine.currentVersionId ? versions.getVersion(orgId, machine.slug, machine.currentVersionId) : undefined;
    const inherited = Object.fromEntries(
      Object.entries(current?.indexSelectors ?? {}).filter(([index]) => machine.indexes.includes(index)),
    );
    const record: MachineVersionRecord = {
      id: claims.id,
      orgId,
      machine: machine.slug,
      createdAt: new Date().toISOString(),
      clientInfo,
      indexSelectors: { ...inherited, ...givenSelectors },
    };
    const result = await versions.finalizeVersion(record, code, makeCurrent);
    if (result.kind === 'no-machine') throw notFound(`machine ${machine.slug} does not exist`);
    return json({ machineVersionId: result.record.id });
  });
};

const versionCursor = (cursor: string | null): VersionCursor | undefined => {
  const position = decodeCursor(cursor);
  if (position === undefined) return undefined;
  if (!Array.isArray(position) || position.length !== 2 || !position.every((part) => typeof part === 'string')) {
    throw invalidParameter('cursor', 'cursor is not one this service returned');
  }
  return { createdAt: position[0] as string, id: position[1] as string };
};

const optionalClientInfo = (value: unknown): string => {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw invalidParameter('clientInfo', 'clientInfo must be a string');
  if (value.length > MAX_CLIENT_INFO_CHARS)
    throw invalidParameter('clientInfo', `clientInfo may be at most ${MAX_CLIENT_INFO_CHARS} characters`);
  return value;
};

const optionalBoolean = (value: unknown, parameter: string): boolean => {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw invalidParameter(parameter, `${parameter} must be a boolean`);
  return value;
};

/** Keys must be indexes the machine declares; values JSONPath strings into the context (`$...`). */
const optionalSelectors = (value: unknown, machine: MachineRecord): Record<string, string> => {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidParameter('indexSelectors', 'indexSelectors must be an object mapping index names to JSONPath strings');
  }
  const selectors: Record<string, string> = {};
  for (const [index, selector] of Object.entries(value)) {
    if (!machine.indexes.includes(index)) {
      const declared = machine.indexes.length > 0 ? `it declares ${machine.indexes.join(', ')}` : 'it declares none';
      throw invalidParameter('indexSelectors', `machine ${machine.slug} has no index named ${index} (${declared})`);
    }
    if (typeof selector !== 'string' || !selector.startsWith('$') || selector.length > MAX_SELECTOR_CHARS) {
      throw invalidParameter(
        'indexSelectors',
        `the selector for index ${index} must be a JSONPath string starting with $ (at most ${MAX_SELECTOR_CHARS} characters)`,
      );
    }
    const problem = selectorProblem(selector);
    if (problem !== undefined)
      throw invalidParameter('indexSelectors', `the selector for index ${index} is not a supported JSONPath (${problem}; docs/indexes.md)`);
    selectors[index] = selector;
  }
  return selectors;
};
