import { missingUser, notFound } from '../../domain/errors.js';
import { type ApiContext, authenticate } from '../api-context.js';
import type { Router } from '../router.js';

/**
 * GET /metrics: the node's metrics in Prometheus's text format (docs/configuration.md, Metrics and logs), for the operator
 * credential, or anyone when the node runs with --metrics-public (a scraper inside a trusted network).
 * Not part of the State Backed API.
 */
export const registerMetricsRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/metrics', async (request) => {
    const { metrics } = context;
    if (!metrics?.public) {
      const caller = authenticate(context, request);
      if (caller.kind !== 'operator')
        throw missingUser("the node's metrics need the operator credential, not a key token (or start the node with --metrics-public)");
    }
    if (!metrics) throw notFound('this node keeps no metrics');
    return { status: 200, headers: { 'cache-control': 'no-store' }, raw: { contentType: metrics.contentType, data: await metrics.text() } };
  });
};
