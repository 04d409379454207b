import { decodeCursor } from '../../domain/cursor.js';
import { invalidParameter, notFound } from '../../domain/errors.js';
import { type IndexOp, type IndexPosition, indexOps, isIndexableValue, MAX_INDEX_VALUE_BYTES } from '../../domain/index-values.js';
import { limits } from '../../domain/limits.js';
import { isSlug } from '../../domain/names.js';
import { type ApiContext, callerInOrg, requireMachine } from '../api-context.js';
import { json } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';

/** A cursor holds an index value (≤ 512 bytes, up to twice that as JSON) and a name, in base64url. */
const MAX_INDEX_CURSOR_CHARS = 4096;

/**
 * GET /machines/{m}/indexes/{index}/query (wire-protocol §3.5, docs/indexes.md): one page of an index in
 * index order (value, then instance name), read from the owners' stores, which write the entries with
 * the heads they come from.
 */
export const registerIndexRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/machines/:machine/indexes/:index/query', async (request) => {
    const { orgId } = callerInOrg(context, request, 'indexes.read');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const index = request.params.index as string;
    if (!machine.indexes.includes(index)) throw notFound(`machine ${machine.slug} has no index ${index}`);
    const { query } = request;
    const filter = filterOf(query.get('op'), query.get('value'));
    const descending = directionOf(query.get('dir'));
    const limit = limitOf(query.get('limit'), context.settings.pageSize);
    const after = positionOf(query.get('cursor'));
    // (on a cluster node: gathered from the owners of every partition, each caught up with the log)
    const found = await context.reads.queryIndex({
      orgId,
      machine: machine.slug,
      index,
      ...(filter ? { filter } : {}),
      descending,
      ...(after ? { after } : {}),
      limit: limit + 1,
    });
    context.runtime.countRead(orgId, machine.slug);
    const { items, cursor } = pageOf(found, limit, (last) => [last.value, last.name]);
    return json({ instances: items.map((entry) => ({ indexValue: entry.value, slug: entry.name })), cursor });
  });
};

/** `op` and `value` come together (the client sends both or neither); either alone names the other. */
const filterOf = (op: string | null, value: string | null): { op: IndexOp; value: string } | undefined => {
  if (op === null && value === null) return undefined;
  if (op === null) throw invalidParameter('op', `op is required with value: one of ${indexOps.join(', ')}`);
  if (!indexOps.includes(op as IndexOp)) throw invalidParameter('op', `op must be one of ${indexOps.join(', ')}`);
  if (value === null) throw invalidParameter('value', `value is required with op ${op}`);
  // Nothing else can be in an index, and range reads start from the value as a key.
  if (!isIndexableValue(value))
    throw invalidParameter('value', `value must be at most ${MAX_INDEX_VALUE_BYTES} bytes of UTF-8 without control characters`);
  return { op: op as IndexOp, value };
};

const directionOf = (dir: string | null): boolean => {
  if (dir === null || dir === 'asc') return false;
  if (dir === 'desc') return true;
  throw invalidParameter('dir', 'dir must be asc or desc');
};

/** Defaults to the page size of list endpoints; at most maxIndexQueryLimit (or the page size, if larger). */
const limitOf = (text: string | null, pageSize: number): number => {
  if (text === null) return pageSize;
  const max = Math.max(limits.maxIndexQueryLimit, pageSize);
  const limit = /^\d{1,9}$/.test(text) ? Number(text) : Number.NaN;
  if (!(limit >= 1 && limit <= max)) throw invalidParameter('limit', `limit must be an integer from 1 to ${max}`);
  return limit;
};

const positionOf = (cursor: string | null): IndexPosition | undefined => {
  const position = decodeCursor(cursor, MAX_INDEX_CURSOR_CHARS);
  if (position === undefined) return undefined;
  if (!Array.isArray(position) || position.length !== 2) throw invalidParameter('cursor', 'cursor is not one this service returned');
  const [value, name] = position as unknown[];
  if (typeof value !== 'string' || !isIndexableValue(value) || !isSlug(name))
    throw invalidParameter('cursor', 'cursor is not one this service returned');
  return { value, name };
};
