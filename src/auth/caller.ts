import { missingScope } from '../domain/errors.js';
import type { Scope } from '../domain/scopes.js';

/**
 * Who is calling, once the credential is verified. An operator acts as an admin member of every org;
 * a key token acts in its key's org with its key's scopes.
 */
export type Caller =
  | { kind: 'operator'; authContext: Record<string, unknown>; requestedOrgId: string | undefined }
  | {
      kind: 'key';
      keyId: string;
      orgId: string;
      scopes: ReadonlySet<Scope>;
      authContext: Record<string, unknown>;
      requestedOrgId: string | undefined;
    };

export const hasScope = (caller: Caller, scope: Scope): boolean => caller.kind === 'operator' || caller.scopes.has(scope);

/**
 * Which of `scopes` the caller lacks (none for the operator). A key cannot hand out more than it has:
 * neither in keys it makes nor through token providers, which mint tokens carrying a key's scopes.
 */
export const scopesLacking = (caller: Caller, scopes: readonly Scope[]): Scope[] =>
  caller.kind === 'operator' ? [] : scopes.filter((scope) => !caller.scopes.has(scope));

/** Passes when the caller has any one of the scopes; 403 `missing-scope` otherwise. */
export const requireScope = (caller: Caller, ...anyOf: Scope[]): void => {
  if (!anyOf.some((scope) => hasScope(caller, scope))) throw missingScope(anyOf);
};
