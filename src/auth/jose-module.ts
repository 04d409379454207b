import { onFirstUse } from '../domain/on-first-use.js';

/**
 * jose, loaded when a token exchange first needs it: only orgs with identity providers use it, and
 * loading it at start cost every node ≈ 0.06 s of CPU (of ≈ 0.45 s).
 */
export const jose: () => Promise<typeof import('jose')> = onFirstUse(() => import('jose'));
