/**
 * jose, loaded when a token exchange first needs it: only orgs with identity providers use it, and
 * loading it at start cost every node ≈ 0.06 s of CPU (of ≈ 0.45 s).
 */
let loaded: Promise<typeof import('jose')> | undefined;

export const jose = (): Promise<typeof import('jose')> => (loaded ??= import('jose'));
