import type { MigrationEdge } from '../domain/migration-path.js';

/** What the runtime needs to know of machine versions; the version store provides it. */
export interface VersionSource {
  /** A machine's migrations: the upgrade path search walks them. */
  listMigrations(orgId: string, machine: string): MigrationEdge[];
  /** `indexSelectors`: index name → JSONPath into the context (runtime/index-values.ts). */
  getVersion(orgId: string, machine: string, versionId: string): { id: string; indexSelectors?: Record<string, string> } | undefined;
  getVersionCode(orgId: string, versionId: string): string | undefined;
  /** A migration's bundle (an upgrade runs it). */
  getMigrationCode(orgId: string, migrationId: string): string | undefined;
}
