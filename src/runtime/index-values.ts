import { selectIndexValues } from '../domain/index-values.js';
import type { InstanceHead } from '../store/instance-store.js';
import type { VersionSource } from './version-source.js';

type Selectors = Record<string, string> | undefined;

/**
 * Sets heads' `indexValues` from their own version and context: the one place index values are
 * derived. Every head the runtime commits after a change of context or version passes here (create,
 * event, delayed event, message, and a version upgrade), so the values always follow the version the
 * head is on.
 */
export class HeadIndexer {
  /**
   * Selectors by org, machine and version. A version's selectors never change once it is finalized,
   * and reading its record from the store cost ≈ 19 µs a commit (msgpack records), more than the
   * selectors' evaluation. Only found versions are kept; deleted ones are dropped (forget).
   */
  private readonly selectors = new Map<string, Selectors>();

  constructor(private readonly versions: VersionSource) {}

  /** Sets (or clears) `head.indexValues`; the caller has just built the head. Returns it. */
  index(head: InstanceHead): InstanceHead {
    const values = selectIndexValues(head.context, this.selectorsOf(head));
    if (values) head.indexValues = values;
    else delete head.indexValues;
    return head;
  }

  /** Versions deleted (with their machine): their selectors go. */
  forget(versionIds: string[]): void {
    if (versionIds.length === 0) return;
    const gone = new Set(versionIds);
    for (const key of this.selectors.keys()) if (gone.has(key.slice(key.lastIndexOf('\u0000') + 1))) this.selectors.delete(key);
  }

  private selectorsOf(head: InstanceHead): Selectors {
    const key = `${head.orgId}\u0000${head.machine}\u0000${head.versionId}`;
    if (this.selectors.has(key)) return this.selectors.get(key);
    const version = this.versions.getVersion(head.orgId, head.machine, head.versionId);
    if (!version) return undefined;
    this.selectors.set(key, version.indexSelectors);
    return version.indexSelectors;
  }
}
