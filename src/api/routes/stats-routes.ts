import { missingUser } from '../../domain/errors.js';
import { type ApiContext, authenticate } from '../api-context.js';
import { json } from '../http-types.js';
import type { Router } from '../router.js';

/**
 * GET /stats, for the operator only: what the node holds in memory (its RSS and heap, the actors it
 * holds and how many are live, each sandbox worker's RSS and each isolate's heap and live actors), and the realtime sockets open.
 * Not part of the State Backed API; `make bench` reads it.
 */
export const registerStatsRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/stats', async (request) => {
    const caller = authenticate(context, request);
    if (caller.kind !== 'operator') throw missingUser("the node's stats need the operator credential, not a key token");
    return json({ ...(await context.runtime.stats()), realtime: context.realtimeStats?.() ?? null });
  });
};
