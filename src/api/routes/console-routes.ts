import { notFound } from '../../domain/errors.js';
import { clipped } from '../../domain/names.js';
import { ConsoleAssets } from '../console-assets.js';
import type { Router } from '../router.js';

/**
 * The web console at `/console` (static files; the page calls the API with the credential its user
 * signs in with, so these answers need none). `/console` and `/console/` are the app (the router
 * reads them alike; the page names its files from `/console/`), as is any name without an extension.
 */
export const registerConsoleRoutes = (router: Router, assets = new ConsoleAssets()): void => {
  const serve = (name: string) => {
    const answer = assets.answer(name);
    if (answer) return answer;
    if (!assets.built) throw notFound('the web console was not built: run `make build`');
    throw notFound(`the console has no file ${clipped(name)}`);
  };
  router.add('GET', '/console', () => serve(''));
  router.add('GET', '/console/:file', (request) => serve(request.params.file as string));
};
