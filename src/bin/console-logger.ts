import type { Logger } from '../domain/logger.js';
import type { LogFormat } from './serve-config.js';

/**
 * The node's log lines, on stderr, one per message:
 * - text (the default): `statehold <level>: message key=value ...`;
 * - json: one object a line, `{time, level, message, ...fields}` (a request's lines carry requestId,
 *   org, machine and instance where it names them), for a log shipper to read without parsing prose.
 */
export const consoleLogger = (format: LogFormat = 'text'): Logger => {
  const line = format === 'json' ? jsonLine : textLine;
  const write = (level: string, message: string, fields?: Record<string, unknown>) => process.stderr.write(line(level, message, fields));
  return {
    info: (message, fields) => write('info', message, fields),
    warn: (message, fields) => write('warn', message, fields),
    error: (message, fields) => write('error', message, fields),
  };
};

/**
 * What a node says on stdout as it starts (where it listens, the operator key it generated, progress
 * of long start-up work): `statehold: line` as text, an info object as json.
 */
export const consoleAnnouncer =
  (format: LogFormat = 'text'): ((line: string) => void) =>
  (line) =>
    process.stdout.write(format === 'json' ? jsonLine('info', line) : `statehold: ${line}\n`);

const textLine = (level: string, message: string, fields?: Record<string, unknown>): string => {
  const rest = fields
    ? Object.entries(fields)
        .map(([k, v]) => ` ${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join('')
    : '';
  return `statehold ${level}: ${message}${rest}\n`;
};

/** Time, level and message first; a field of the same name does not replace them. */
const jsonLine = (level: string, message: string, fields?: Record<string, unknown>): string => {
  const entry: Record<string, unknown> = { time: new Date().toISOString(), level, message };
  if (fields) for (const [key, value] of Object.entries(fields)) if (!(key in entry)) entry[key] = value;
  return `${JSON.stringify(entry)}\n`;
};
