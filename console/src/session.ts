/**
 * Who the console calls the API as. Kept in this tab's sessionStorage only: it goes when the tab
 * closes, and other tabs or sites never see it.
 */
export interface Session {
  /** The bearer: the operator key, or a State Backed token (a JWT). */
  token: string;
  /** `x-statebacked-org-id`, for an operator key that spans several orgs. */
  orgId?: string;
  /** operator: the node's operator key (sees /orgs, /cluster); token: a key's token, limited to its scopes. */
  kind: 'operator' | 'token';
}

const STORAGE_KEY = 'statehold-console-session';

export const loadSession = (): Session | undefined => {
  try {
    const stored = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? 'null') as Session | null;
    return stored && typeof stored.token === 'string' ? stored : undefined;
  } catch {
    return undefined;
  }
};

export const saveSession = (session: Session): void => sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));

export const clearSession = (): void => sessionStorage.removeItem(STORAGE_KEY);

/** The operator key the node prints once (`shadm_...`), or one given with --admin-key: anything that is not a JWT. */
export const kindOf = (token: string): Session['kind'] => (/^[\w-]+\.[\w-]+\.[\w-]+$/.test(token) ? 'token' : 'operator');
