import { anonymousAccessRecords } from '../../auth/anonymous-access.js';
import { hasScope, requireScope } from '../../auth/caller.js';
import { decodeStringsCursor } from '../../domain/cursor.js';
import { invalidParameter, missingOrg, missingUser } from '../../domain/errors.js';
import { prettyId } from '../../domain/ids.js';
import { requireDisplayName } from '../../domain/names.js';
import type { OrgRecord } from '../../domain/records.js';
import type { OrgCursor } from '../../store/catalog.js';
import { type ApiContext, authenticate } from '../api-context.js';
import { json, jsonBody } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';

/**
 * GET /orgs and POST /orgs (wire-protocol §3.10), and PATCH /orgs/{orgId}, ours, which switches
 * anonymous access on or off (its records are made or removed, wire-protocol §4.2).
 */
export const registerOrgRoutes = (router: Router, context: ApiContext): void => {
  const view = (org: OrgRecord) => ({
    id: org.id,
    name: org.name,
    role: 'admin',
    createdAt: org.createdAt,
    allowAnonymousAccess: org.allowAnonymousAccess,
    limits: { monthlyEventsLimit: context.settings.monthlyEventsLimit, monthlyReadsLimit: context.settings.monthlyReadsLimit },
  });

  /** Oldest first, `--page-size` a page, like every list (wire-protocol §1.5). */
  router.add('GET', '/orgs', (request) => {
    const caller = authenticate(context, request);
    const after = orgCursor(request.query.get('cursor'));
    if (caller.kind === 'operator') {
      const pageSize = context.settings.pageSize;
      const { items, cursor } = pageOf(context.catalog.listOrgsAfter(after, pageSize + 1), pageSize, (last) => [last.createdAt, last.id]);
      return json({ orgs: items.map(view), cursor });
    }
    requireScope(caller, 'org.read');
    // A key sees its own org only: one page of one; any cursor is past it.
    const org = after === undefined ? context.catalog.getOrg(caller.orgId) : undefined;
    return json({ orgs: org ? [{ ...view(org), role: hasScope(caller, 'org.write') ? 'admin' : 'read' }] : [] });
  });

  router.add('POST', '/orgs', async (request) => {
    const caller = authenticate(context, request);
    if (caller.kind !== 'operator') throw missingUser('creating an org needs the operator credential, not a key token');
    const body = jsonBody(request);
    const name = requireDisplayName(body.name, 'name');
    const allowAnonymousAccess = body.allowAnonymousAccess ?? true;
    if (typeof allowAnonymousAccess !== 'boolean') throw invalidParameter('allowAnonymousAccess', 'allowAnonymousAccess must be a boolean');
    const org: OrgRecord = { id: prettyId('org'), name, createdAt: new Date().toISOString(), allowAnonymousAccess };
    await context.catalog.createOrg(org, allowAnonymousAccess ? anonymousAccessRecords(org.id, context.sealer) : undefined);
    return json({ id: org.id });
  });

  router.add('PATCH', '/orgs/:orgId', async (request) => {
    const caller = authenticate(context, request);
    const orgId = request.params.orgId as string;
    if (caller.kind === 'operator') {
      if (!context.catalog.getOrg(orgId)) throw missingOrg(`org ${orgId.slice(0, 64)} does not exist`);
    } else {
      requireScope(caller, 'org.write');
      if (caller.orgId !== orgId) throw missingOrg('this token belongs to a different org');
    }
    const body = jsonBody(request);
    const allowAnonymousAccess = body.allowAnonymousAccess;
    if (typeof allowAnonymousAccess !== 'boolean') throw invalidParameter('allowAnonymousAccess', 'allowAnonymousAccess must be a boolean');
    await context.catalog.setAnonymousAccess(orgId, allowAnonymousAccess ? anonymousAccessRecords(orgId, context.sealer) : undefined);
    // (turning it on again replaces the anonymous key too)
    context.authenticator.keysChanged();
    const org = context.catalog.getOrg(orgId);
    if (!org) throw missingOrg(`org ${orgId.slice(0, 64)} does not exist`);
    return json(view(org));
  });
};

const orgCursor = (cursor: string | null): OrgCursor | undefined => {
  const position = decodeStringsCursor(cursor, 2);
  return position && { createdAt: position[0] as string, id: position[1] as string };
};
