import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { open } from 'lmdb';
import type { NodeStore } from '../../src/store/catalog.js';
import { LmdbInstanceStore } from '../../src/store/lmdb/lmdb-instance-store.js';
import { WriteAheadLog } from '../../src/store/lmdb/write-ahead-log.js';
import { repoRoot } from './paths.js';

/**
 * What a stopped node's data dir holds: the last write-ahead log frame LMDB had applied, and the
 * frames after it, that only the log has (read without starting a store, which would apply them).
 */
export const logState = async (dataDir: string): Promise<{ applied: number; onlyInLog: number[] }> => {
  const root = open({ path: join(dataDir, 'statehold.lmdb'), compression: false, maxDbs: 32, overlappingSync: false });
  const applied = root.openDB<boolean, string>({ name: 'wal', encoding: 'msgpack', useVersions: true }).getEntry('applied')?.version ?? 0;
  await root.close();
  const onlyInLog = WriteAheadLog.read(join(dataDir, 'wal'), applied)
    .map((frame) => frame.seq)
    .filter((seq) => seq > applied);
  return { applied, onlyInLog };
};

/** The embedded store's instances as the LMDB store they are, for what only it answers (hasUnappliedInstances). */
export const lmdbInstances = (store: NodeStore): LmdbInstanceStore => {
  if (!(store.instances instanceof LmdbInstanceStore)) throw new Error("the node store's instances are not an LmdbInstanceStore");
  return store.instances;
};

/**
 * Runs an ES module snippet in a separate node process, from the repository (`./dist/...` imports the
 * built code), for kills and a second LMDB writer.
 */
export const runScript = (source: string): { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string } => {
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', source], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
};
