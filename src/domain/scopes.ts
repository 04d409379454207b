/** Key scopes (wire-protocol §2.3), including `indexes.read` which the query endpoint needs. */
export const allScopes = [
  'events.write',
  'events.read',
  'state.read',
  'instances.read',
  'instances.write',
  'instances.admin',
  'machines.read',
  'machines.write',
  'machines.admin',
  'machine-versions.read',
  'machine-versions.write',
  'analytics.read',
  'org.read',
  'org.write',
  'org.keys.write',
  'org-members.write',
  'logs.read',
  'tokens.admin',
  'indexes.read',
] as const;

export type Scope = (typeof allScopes)[number];

const scopeSet: ReadonlySet<string> = new Set(allScopes);

export const isScope = (value: unknown): value is Scope => typeof value === 'string' && scopeSet.has(value);

/**
 * `POST /keys {use}` presets (wire-protocol §2.3). `ci` also carries `machines.admin`: our contract is
 * that a CI key creates, lists, reads and deletes machines, and deletion needs that scope.
 */
export const scopePresets = {
  production: ['events.write', 'state.read', 'instances.write', 'indexes.read'],
  ci: ['machines.read', 'machines.write', 'machines.admin', 'machine-versions.read', 'machine-versions.write'],
} as const satisfies Record<string, readonly Scope[]>;

type ScopePreset = keyof typeof scopePresets;

export const isScopePreset = (value: unknown): value is ScopePreset => value === 'production' || value === 'ci';
