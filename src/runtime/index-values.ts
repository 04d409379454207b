import { selectIndexValues } from '../domain/index-values.js';
import type { InstanceHead } from '../store/instance-store.js';
import type { VersionSource } from './version-source.js';

/**
 * Sets `head.indexValues` from the head's own version and context: the one place index values are
 * derived. Every head the runtime commits after a change of context or version passes here (create,
 * event, delayed event, message, and a version upgrade), so the values always follow the version the
 * head is on. Mutates the head, which the caller has just built; returns it.
 */
export const indexHead = (head: InstanceHead, versions: VersionSource): InstanceHead => {
  const selectors = versions.getVersion(head.orgId, head.machine, head.versionId)?.indexSelectors;
  const values = selectIndexValues(head.context, selectors);
  if (values) head.indexValues = values;
  else delete head.indexValues;
  return head;
};
