import type { ApiContext } from './api-context.js';
import type { ApiRequest } from './http-types.js';

/** A Host header that names a host (a name, an IPv4 or a bracketed IPv6 address) and maybe a port, nothing else. */
const PLAIN_HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

/**
 * The base of the links an answer hands out (a code upload URL, the billing portal): the public URL
 * when the operator set one; else the host the request came to (its Host header), which reaches this
 * node from wherever the client is, where the default public URL (`http://<host>:<port>`) does not
 * when the node listens on 0.0.0.0 or behind a port mapping. A Host that is not a plain host is not
 * echoed.
 */
export const requestBase = (context: ApiContext, request: ApiRequest): string => {
  const host = request.headers.host;
  if (context.settings.publicUrlSet || host === undefined || !PLAIN_HOST.test(host)) return context.settings.publicUrl;
  return `http://${host}`;
};
