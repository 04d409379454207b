import { requireScope } from '../../auth/caller.js';
import { type ApiContext, authenticate } from '../api-context.js';
import { json } from '../http-types.js';
import { requestBase } from '../request-base.js';
import type { Router } from '../router.js';

/** Where the default billing link points (the node's own page). */
const BILLING_PORTAL_PATH = '/billing-portal';

/** GET /billing: a link to the billing portal the operator configured (wire-protocol §3.12). */
export const registerBillingRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/billing', (request) => {
    const caller = authenticate(context, request);
    requireScope(caller, 'org.write');
    context.authenticator.resolveOrg(caller);
    const { billingUrl } = context.settings;
    return json({ url: billingUrl ?? `${requestBase(context, request)}${BILLING_PORTAL_PATH}` });
  });
};

/** The default billing link points here: a self-hosted node has nothing to bill. */
export const registerBillingPortalRoute = (router: Router): void => {
  router.add('GET', BILLING_PORTAL_PATH, () => ({
    status: 200,
    raw: {
      contentType: 'text/html; charset=utf-8',
      data: '<!doctype html><title>Statehold billing</title><p>This Statehold node is self-hosted: there is nothing to pay. Operators can point this link elsewhere with STATEHOLD_BILLING_URL.</p>',
    },
  }));
};
