import type { Router } from '../router.js';
import { json } from '../http-types.js';

/** GET /health needs no credential: 200 whenever the node can serve (the server answers 503 while draining). */
export const registerHealthRoutes = (router: Router): void => {
  router.add('GET', '/health', () => json({ status: 'ok' }));
};
