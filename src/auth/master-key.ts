import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MASTER_KEY_FILE = 'master.key';

/**
 * The key that seals signing-key secrets at rest. It comes from STATEHOLD_MASTER_KEY (32 bytes as
 * base64 or hex) or from `<data-dir>/master.key`, created with mode 0600 on first start.
 */
export const loadMasterKey = (dataDir: string, configured: string | undefined): Buffer => {
  if (configured) return parseMasterKey(configured, 'STATEHOLD_MASTER_KEY');
  const file = join(dataDir, MASTER_KEY_FILE);
  if (existsSync(file)) return parseMasterKey(readFileSync(file, 'utf8').trim(), file);
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
};

const parseMasterKey = (text: string, source: string): Buffer => {
  const bytes = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (bytes.length !== 32) throw new Error(`${source}: the master key must be 32 bytes, as base64 or hex`);
  return bytes;
};
