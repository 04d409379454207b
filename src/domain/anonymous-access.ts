/**
 * The fixed names of anonymous access (wire-protocol §4.1–4.2). The real client hard-codes them,
 * whatever host it talks to.
 */
export const ANONYMOUS_SERVICE = 'anonymous-statebacked-dev';

/** The `aud` and `iss` of the tokens the client signs itself with the org id as the HMAC key. */
export const anonymousAudience = (orgId: string): string => `https://${orgId}.anonymous.auth.statebacked.dev`;

/** Anonymous auth contexts carry only these (plus `auth: "anonymous"`), so authorizers can tell them apart. */
export const anonymousIdentityMapping = { 'sid.$': '$.sid', 'did.$': '$.did' };
export const anonymousTokenMapping = { 'sid.$': '$.sid', 'did.$': '$.did', auth: 'anonymous' };
