import { invalidParameter } from '../../domain/errors.js';
import type { LogEntry } from '../../store/log-store.js';
import { type ApiContext, callerInOrg } from '../api-context.js';
import { json } from '../http-types.js';
import type { Router } from '../router.js';

/** At most this many entries per call (wire-protocol §3.6), unless more share one millisecond (logPage). */
const MAX_LOGS = 100;
/** Entries scanned per call when filters skip most of them. */
const MAX_SCANNED = 10_000;

/**
 * GET /logs (wire-protocol §3.6). `from` is inclusive; `maxTimestamp` is one millisecond past the last
 * entry returned, so continuing from it repeats nothing, and it echoes `from` exactly when nothing is
 * new, which is what makes `client.logs.watch` sleep instead of spinning.
 */
export const registerLogRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/logs', (request) => {
    const { orgId } = callerInOrg(context, request, 'logs.read');
    const fromText = request.query.get('from');
    if (!fromText) throw invalidParameter('from', 'from is required (an ISO-8601 date-time)');
    const fromMs = parseTime(fromText, 'from');
    const toText = request.query.get('to');
    const toMs = toText ? parseTime(toText, 'to') : Date.now() + 1;
    const machine = request.query.get('machine') ?? undefined;
    const instance = request.query.get('instance') ?? undefined;
    const version = request.query.get('version') ?? undefined;
    const matches = (entry: LogEntry) =>
      (machine === undefined || entry.machine === machine) &&
      (instance === undefined || entry.instance === instance) &&
      (version === undefined || entry.versionId === version);

    const scanned = context.logs.listLogs(orgId, fromMs, toMs, MAX_SCANNED);
    const picked = logPage(scanned.filter(matches), MAX_LOGS);
    const lastScanned = scanned.length === MAX_SCANNED ? scanned.at(-1)?.timestamp : undefined;
    const last = picked.at(-1)?.timestamp ?? (lastScanned !== undefined ? lastScanned - 1 : undefined);
    return json({
      maxTimestamp: last === undefined || last + 1 <= fromMs ? fromText : new Date(last + 1).toISOString(),
      logs: picked.map((entry) => ({
        timestamp: new Date(entry.timestamp).toISOString(),
        orgId: entry.orgId,
        machineName: entry.machine ?? '',
        instanceName: entry.instance ?? '',
        machineVersionId: entry.versionId ?? '',
        outputType: entry.level === 'error' || entry.level === 'warn' ? 'stderr' : 'stdout',
        log: entry.args.map(formatArg).join(' '),
      })),
    });
  });
};

/**
 * The entries of one page, oldest first: at most `max`, cut at a millisecond boundary so that the next
 * call (from = maxTimestamp, one millisecond past the last entry) misses nothing. When more than `max`
 * entries share the first millisecond, all of them make the page: a page of `max` would lose the rest.
 */
export const logPage = (entries: LogEntry[], max: number): LogEntry[] => {
  if (entries.length <= max) return entries;
  const boundary = (entries[max] as LogEntry).timestamp;
  const cut = entries.slice(0, max).filter((entry) => entry.timestamp < boundary);
  if (cut.length > 0) return cut;
  return entries.filter((entry) => entry.timestamp === boundary);
};

/** An ISO-8601 date-time such as `Date#toISOString` writes (Date.parse alone also takes `0` or `May 1`). */
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** Whether the text's date is one the calendar has: Date.parse rolls 2026-02-30 over to March 2. */
const realDay = (text: string): boolean => {
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(year, month - 1, day)).getUTCDate() === day;
};

const parseTime = (text: string, parameter: string): number => {
  const ms = ISO_DATE_TIME.test(text) && realDay(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms)) throw invalidParameter(parameter, `${parameter} must be an ISO-8601 date-time, e.g. 2026-01-31T12:00:00.000Z`);
  return ms;
};

/** Strings print as they are; everything else as JSON, so a structured log line stays parseable. */
const formatArg = (arg: unknown): string => (typeof arg === 'string' ? arg : (JSON.stringify(arg) ?? String(arg)));
