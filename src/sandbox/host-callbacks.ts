/**
 * The only host functions handed to an isolate. Each takes and returns primitives (ivm.Callback copies
 * them), validates its input and never throws into the isolate:
 * - random bytes (hex) for crypto.getRandomValues / randomUUID;
 * - the console sink, which stamps the entry with the host clock and the version id.
 */
import { randomBytes } from 'node:crypto';
import ivm from 'isolated-vm';
import type { CapturedLog, LogLevel } from './types.js';

const LEVELS: ReadonlySet<string> = new Set(['log', 'info', 'warn', 'error', 'debug']);
const MAX_RANDOM_BYTES = 65536;

export function randomCallback(): ivm.Callback {
  return new ivm.Callback((n: unknown): string => {
    const count = typeof n === 'number' && Number.isInteger(n) && n > 0 ? Math.min(n, MAX_RANDOM_BYTES) : 0;
    return randomBytes(count).toString('hex');
  });
}

/** Parses one entry sent by the in-isolate console; anything malformed is dropped. */
export function parseLogEntry(json: unknown, versionId: string, now: number): CapturedLog | undefined {
  if (typeof json !== 'string') return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (raw === null || typeof raw !== 'object') return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.level !== 'string' || !LEVELS.has(r.level) || !Array.isArray(r.args)) return undefined;
  const entry: CapturedLog = { level: r.level as LogLevel, args: r.args, timestamp: now, versionId };
  if (typeof r.instanceKey === 'string') entry.instanceKey = r.instanceKey;
  if (typeof r.machineInstanceName === 'string') entry.machineInstanceName = r.machineInstanceName;
  return entry;
}

export function logCallback(versionId: string, onLog: ((e: CapturedLog) => void) | undefined): ivm.Callback {
  return new ivm.Callback((json: unknown): void => {
    if (!onLog) return;
    const entry = parseLogEntry(json, versionId, Date.now());
    if (!entry) return;
    try {
      onLog(entry);
    } catch {
      // a failing log sink must not turn into an exception inside machine code
    }
  });
}
