/**
 * CORS for browser apps calling the API with bearer tokens. No cookies are involved, so any origin may
 * call; preflight names the headers the State Backed client sends.
 */
export const corsHeaders: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'content-type, x-request-id',
};

export const preflightHeaders: Record<string, string> = {
  ...corsHeaders,
  'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, content-encoding, x-statebacked-org-id, x-statebacked-act, x-request-id',
  'access-control-max-age': '86400',
};
