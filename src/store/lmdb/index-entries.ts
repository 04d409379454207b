import type { Database, RootDatabase } from 'lmdb';
import { AFTER_ALL_VALUES, compareIndexPositions, type IndexOp, type IndexPosition, valuesIn } from '../../domain/index-values.js';
import type { InstanceHead, IndexQuery } from '../instance-store.js';

/** [orgId, machine, index, value, instance name] */
type IndexKey = [string, string, string, string, string];

/** After every instance name (slugs are ASCII). */
const AFTER_ALL_NAMES = '\uffff';

/**
 * Points of an index's key space that no entry sits on (no name is empty or AFTER_ALL_NAMES, no value is
 * AFTER_ALL_VALUES), so a range between two of them reads the same whichever end LMDB includes.
 */
const BOTTOM: IndexPosition = { value: '', name: '' };
const TOP: IndexPosition = { value: AFTER_ALL_VALUES, name: '' };
const before = (value: string): IndexPosition => ({ value, name: '' });
const beyond = (value: string): IndexPosition => ({ value, name: AFTER_ALL_NAMES });

/** The stretches of an index, in ascending order, whose values pass the filter. */
const rangesOf = (filter: { op: IndexOp; value: string } | undefined): Array<[IndexPosition, IndexPosition]> => {
  if (!filter) return [[BOTTOM, TOP]];
  const { value } = filter;
  switch (filter.op) {
    case 'eq':
      return [[before(value), beyond(value)]];
    case 'ne':
      return [
        [BOTTOM, before(value)],
        [beyond(value), TOP],
      ];
    case 'gt':
      return [[beyond(value), TOP]];
    case 'gte':
      return [[before(value), TOP]];
    case 'lt':
      return [[BOTTOM, before(value)]];
    case 'lte':
      return [[BOTTOM, beyond(value)]];
  }
};

/**
 * The index db of the LMDB instance store:
 *   indexes [orgId, machine, index, value, name] -> true   (one entry per value of a head's indexValues)
 *
 * LMDB orders string key parts by their UTF-8 bytes, that is by code point (compareIndexValues), so a
 * range read is the index order. `replace` queues its writes in whatever write the caller is inside (the
 * block of a commit, a replay of the write-ahead log, a deletion): entries change with their head.
 */
export class IndexEntries {
  private readonly db: Database<true, IndexKey>;

  constructor(root: RootDatabase) {
    this.db = root.openDB({ name: 'indexes', encoding: 'msgpack' });
  }

  /**
   * Takes the instance's entries from those of `previous` (the head stored before; none for a create)
   * to those of `next` (none for a deletion), writing only what differs.
   */
  replace(previous: InstanceHead | undefined, next: InstanceHead | undefined): void {
    const old = previous?.indexValues;
    const now = next?.indexValues;
    if (old === undefined && now === undefined) return;
    const { orgId, machine, name } = (next ?? previous) as InstanceHead;
    for (const [index, values] of Object.entries(old ?? {})) {
      const kept = valuesIn(now, index);
      for (const value of values) if (!kept?.includes(value)) void this.db.remove([orgId, machine, index, value, name]);
    }
    for (const [index, values] of Object.entries(now ?? {})) {
      const had = valuesIn(old, index);
      for (const value of values) if (!had?.includes(value)) void this.db.put([orgId, machine, index, value, name], true);
    }
  }

  /**
   * Up to `limit` entries of the query, skipping the instances named in `stale` (whose latest head is
   * not in LMDB yet: the caller adds those from that head).
   */
  query(query: IndexQuery, stale: ReadonlySet<string>): IndexPosition[] {
    const { orgId, machine, index, after, limit, descending } = query;
    const keyOf = (at: IndexPosition): IndexKey => [orgId, machine, index, at.value, at.name];
    const out: IndexPosition[] = [];
    const ranges = rangesOf(query.filter);
    if (descending) ranges.reverse();
    for (let [from, to] of ranges) {
      // The cursor narrows each stretch to what lies beyond it in the query's direction.
      if (after && !descending && compareIndexPositions(after, from) > 0) from = after;
      if (after && descending && compareIndexPositions(after, to) < 0) to = after;
      if (compareIndexPositions(from, to) >= 0) continue;
      const range = descending ? { start: keyOf(to), end: keyOf(from), reverse: true } : { start: keyOf(from), end: keyOf(to) };
      for (const key of this.db.getKeys(range)) {
        const position = { value: key[3], name: key[4] };
        if (after && position.value === after.value && position.name === after.name) continue;
        if (stale.has(position.name)) continue;
        out.push(position);
        if (out.length >= limit) return out;
      }
    }
    return out;
  }
}
