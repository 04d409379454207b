/**
 * bench/probes/test-cpu.mjs records a process's CPU (with the children it reaped) and what it spawned;
 * bench/probes/test-cpu-summary.mjs sums the records.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { repoRoot } from './helpers/paths.js';

const probe = join(repoRoot, 'bench', 'probes', 'test-cpu.mjs');
const summary = join(repoRoot, 'bench', 'probes', 'test-cpu-summary.mjs');

t.test('a process records its CPU, its reaped children and what it spawned; the summary adds them up', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'statehold-test-cpu-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const records = join(dir, 'records');
  const script = join(dir, 'spins.mjs');
  // spawns a child that spins ≈ 0.3 s of CPU, waits for it, and exits
  writeFileSync(
    script,
    `import { spawn } from 'node:child_process';
const child = spawn(process.execPath, ['-e', 'const u = Date.now() + 300; while (Date.now() < u);']);
await new Promise((resolve) => child.on('exit', resolve));
`,
  );
  execFileSync(process.execPath, [`--import=${probe}`, script], { env: { ...process.env, TEST_CPU_DIR: records } });
  const [name, ...more] = readdirSync(records);
  t.equal(more.length, 0, 'one record');
  const record = JSON.parse(readFileSync(join(records, name as string), 'utf8')) as {
    file: string;
    selfCpuS: number;
    childrenCpuS: number;
    spawned: Record<string, number>;
  };
  t.equal(record.file, script);
  t.same(record.spawned, { serve: 0, node: 0, natsServer: 0, other: 1 });
  t.ok(record.childrenCpuS >= 0.15, `the child's CPU is counted (${record.childrenCpuS} s)`);
  const text = execFileSync(process.execPath, [summary, records], { encoding: 'utf8' });
  t.match(text, /^1 test files: \d+ CPU-s/);
  t.match(text, /spawned: 0 serve, 0 node, 0 natsServer, 1 other/);

  const cwd = join(dir, 'elsewhere');
  mkdirSync(cwd);
  execFileSync(process.execPath, [`--import=${probe}`, script], { cwd, env: { ...process.env, TEST_CPU_DIR: '' } });
  t.same([readdirSync(records).length, readdirSync(cwd)], [1, []], 'without TEST_CPU_DIR nothing is written');
});
