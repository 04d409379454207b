import type { ApiContext } from '../api-context.js';
import { Router } from '../router.js';
import { registerBillingPortalRoute, registerBillingRoutes } from './billing-routes.js';
import { registerClusterRoutes } from './cluster-routes.js';
import { registerConsoleRoutes } from './console-routes.js';
import { registerHealthRoutes } from './health-routes.js';
import { registerHttpApiRoutes } from './http-api-routes.js';
import { registerIdentityProviderRoutes } from './identity-provider-routes.js';
import { registerIndexRoutes } from './index-routes.js';
import { registerInstanceRoutes } from './instance-routes.js';
import { registerKeyRoutes } from './key-routes.js';
import { registerLogRoutes } from './log-routes.js';
import { registerMachineRoutes } from './machine-routes.js';
import { registerMetricsRoutes } from './metrics-routes.js';
import { registerMigrationRoutes } from './migration-routes.js';
import { registerOpenApiRoute } from './openapi-routes.js';
import { registerOrgRoutes } from './org-routes.js';
import { registerStatsRoutes } from './stats-routes.js';
import { registerTokenExchangeRoutes } from './token-exchange-routes.js';
import { registerTokenProviderRoutes } from './token-provider-routes.js';
import { registerUploadRoutes } from './upload-routes.js';
import { registerUsageRoutes } from './usage-routes.js';
import { registerVersionRoutes } from './version-routes.js';

/** Every route of the API, in one router. */
export const buildRouter = (context: ApiContext): Router => {
  const router = new Router();
  // Routes that verify a credential first (a request with a body has it checked before the body is read).
  router.credentialed(() => {
    registerClusterRoutes(router, context);
    registerOrgRoutes(router, context);
    registerKeyRoutes(router, context);
    registerIdentityProviderRoutes(router, context);
    registerTokenProviderRoutes(router, context);
    registerBillingRoutes(router, context);
    registerMachineRoutes(router, context);
    registerInstanceRoutes(router, context);
    registerIndexRoutes(router, context);
    registerLogRoutes(router, context);
    registerVersionRoutes(router, context);
    registerMigrationRoutes(router, context);
    registerStatsRoutes(router, context);
    registerUsageRoutes(router, context);
  });
  // Routes without one, or that take one only as configured (GET /metrics with --metrics-public).
  registerHealthRoutes(router, context);
  registerTokenExchangeRoutes(router, context, {
    perOrgPerSecond: context.settings.tokenExchangesPerSecond,
    perAddressPerSecond: context.settings.tokenExchangesPerAddress,
  });
  registerBillingPortalRoute(router);
  registerUploadRoutes(router, context);
  registerMetricsRoutes(router, context);
  registerHttpApiRoutes(router, context);
  registerOpenApiRoute(router, context);
  registerConsoleRoutes(router);
  // smply's `invitations send` and `invitations accept` (wire-protocol §3.13, both forms of accept):
  // an invitation makes a user a member of an org, and Statehold has no user accounts.
  const noInvitations =
    'Statehold has no user accounts, so no org members or invitations: give the person a key of the org with the scopes they need (smply keys create, POST /keys); they sign in with its id and secret (statehold smply-login --url <this service> --key-id <id> --key <secret>)';
  router
    .absent('POST', '/org-members', noInvitations)
    .absent('PUT', '/invitations/:code', noInvitations)
    // (any other one-segment path: a typo as likely as an invitation code)
    .absent('PUT', '/:code', `no route for this PUT; if its path is an invitation code (smply invitations accept): ${noInvitations}`);
  return router;
};
