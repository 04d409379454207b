/** What the runtime needs to know of machine versions; the version store provides it. */
export interface VersionSource {
  /** `indexSelectors`: index name → JSONPath into the context (runtime/index-values.ts). */
  getVersion(orgId: string, machine: string, versionId: string): { id: string; indexSelectors?: Record<string, string> } | undefined;
  getVersionCode(orgId: string, versionId: string): string | undefined;
}
