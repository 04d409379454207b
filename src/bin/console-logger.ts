import type { Logger } from '../domain/logger.js';

/** One line per message on stderr: `statehold <level>: message key=value ...`. */
export const consoleLogger = (): Logger => {
  const line = (level: string, message: string, fields?: Record<string, unknown>) => {
    const rest = fields
      ? Object.entries(fields)
          .map(([k, v]) => ` ${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
          .join('')
      : '';
    process.stderr.write(`statehold ${level}: ${message}${rest}\n`);
  };
  return {
    info: (message, fields) => line('info', message, fields),
    warn: (message, fields) => line('warn', message, fields),
    error: (message, fields) => line('error', message, fields),
  };
};
