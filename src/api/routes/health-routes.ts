import { ServiceError } from '../../domain/errors.js';
import type { ApiContext } from '../api-context.js';
import { json } from '../http-types.js';
import type { Router } from '../router.js';

/**
 * GET /health needs no credential: 200 whenever the node can serve (the server answers 503 while
 * draining, and while its storage refuses writes: a restart is what mends that). A cluster node also
 * says whether it sees NATS and its cluster, and answers 503 while it does not (a load balancer then
 * sends requests elsewhere).
 */
export const registerHealthRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/health', () => {
    const refusal = context.storageRefusal?.();
    if (refusal) throw new ServiceError(503, 'unavailable', `not serving: ${refusal.message}`);
    const cluster = context.cluster?.health();
    if (cluster && !cluster.ready) throw new ServiceError(503, 'unavailable', `not serving: ${cluster.reason}`);
    return json(cluster ? { status: 'ok', cluster } : { status: 'ok' });
  });
};
