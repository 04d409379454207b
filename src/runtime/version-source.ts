/** What the runtime needs to know of machine versions; the version store provides it. */
export interface VersionSource {
  getVersion(orgId: string, machine: string, versionId: string): { id: string } | undefined;
  getVersionCode(orgId: string, versionId: string): string | undefined;
}
