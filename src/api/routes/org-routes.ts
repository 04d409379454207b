import { hasScope, requireScope } from '../../auth/caller.js';
import { invalidParameter, missingUser } from '../../domain/errors.js';
import { prettyId } from '../../domain/ids.js';
import type { OrgRecord } from '../../domain/records.js';
import { type ApiContext, authenticate } from '../api-context.js';
import { json, jsonBody } from '../http-types.js';
import type { Router } from '../router.js';

/** GET /orgs and POST /orgs (wire-protocol §3.10). */
export const registerOrgRoutes = (router: Router, context: ApiContext): void => {
  const view = (org: OrgRecord) => ({
    id: org.id,
    name: org.name,
    role: 'admin',
    createdAt: org.createdAt,
    allowAnonymousAccess: org.allowAnonymousAccess,
    limits: { monthlyEventsLimit: context.settings.monthlyEventsLimit, monthlyReadsLimit: context.settings.monthlyReadsLimit },
  });

  router.add('GET', '/orgs', (request) => {
    const caller = authenticate(context, request);
    if (caller.kind === 'operator') return json({ orgs: context.catalog.listOrgs().map(view) });
    requireScope(caller, 'org.read');
    const org = context.catalog.getOrg(caller.orgId);
    return json({ orgs: org ? [{ ...view(org), role: hasScope(caller, 'org.write') ? 'admin' : 'read' }] : [] });
  });

  router.add('POST', '/orgs', async (request) => {
    const caller = authenticate(context, request);
    if (caller.kind !== 'operator') throw missingUser('creating an org needs the operator credential, not a key token');
    const body = jsonBody(request);
    const name = body.name;
    if (typeof name !== 'string' || name.trim() === '' || name.length > 256) {
      throw invalidParameter('name', 'name must be a non-empty string of at most 256 characters');
    }
    const allowAnonymousAccess = body.allowAnonymousAccess ?? true;
    if (typeof allowAnonymousAccess !== 'boolean') throw invalidParameter('allowAnonymousAccess', 'allowAnonymousAccess must be a boolean');
    const org: OrgRecord = { id: prettyId('org'), name, createdAt: new Date().toISOString(), allowAnonymousAccess };
    await context.catalog.createOrg(org);
    return json({ id: org.id });
  });
};
