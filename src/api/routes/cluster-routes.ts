import { invalidParameter, missingUser, notFound } from '../../domain/errors.js';
import { type ApiContext, authenticate } from '../api-context.js';
import { json } from '../http-types.js';
import type { Router } from '../router.js';

/**
 * GET /cluster, for the operator only: this node's id, the members it sees, how many instances it
 * holds and owns, and with `?instance=<org>/<machine>/<name>` which node owns that instance. 404 on an
 * embedded node. Not part of the State Backed API.
 */
export const registerClusterRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/cluster', (request) => {
    const caller = authenticate(context, request);
    if (caller.kind !== 'operator') throw missingUser('the cluster view needs the operator credential, not a key token');
    if (!context.cluster) throw notFound('this node is not part of a cluster (statehold serve)');
    const instance = request.query.get('instance');
    let key: { orgId: string; machine: string; name: string } | undefined;
    if (instance !== null) {
      const [orgId, machine, name, ...more] = instance.split('/');
      if (!orgId || !machine || !name || more.length > 0)
        throw invalidParameter('instance', 'instance must be <org id>/<machine>/<instance name>');
      key = { orgId, machine, name };
    }
    return json(context.cluster.status(key));
  });
};
