// Summarises bench/probes/test-cpu.mjs's records: node bench/probes/test-cpu-summary.mjs <dir> [tap log]
// Prints the CPU of the whole run, by kind of file, and the files that used the most, with their wall
// time (tap's `time=` when the log is given) and what they spawned.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const [dir, log] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node bench/probes/test-cpu-summary.mjs <TEST_CPU_DIR> [tap log]');
  process.exit(2);
}
// (make test runs the tests compiled into dist-test/: a file is named by its source, test/…/x.test.ts)
const sourceOf = (file) => file.replace(/^dist-test\//, '').replace(/\.js$/, '.ts');
const tapTimes = new Map();
if (log) {
  for (const match of readFileSync(log, 'utf8').matchAll(/^(?:not )?ok \d+ - ((?:dist-test\/)?test\/\S+) .*?# time=([\d.]+)(m?s)/gm))
    tapTimes.set(sourceOf(match[1]), Number(match[2]) / (match[3] === 'ms' ? 1000 : 1));
}
const rows = readdirSync(dir)
  .filter((name) => name.endsWith('.json'))
  .map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8')))
  .map((r) => {
    const file = sourceOf(relative(process.cwd(), r.file));
    return { file, cpuS: r.selfCpuS + r.childrenCpuS, wallS: tapTimes.get(file) ?? r.wallS, spawned: r.spawned };
  });
const sum = (list, key) => list.reduce((total, row) => total + row[key], 0);
const kindOf = (file) => (file.startsWith('test/on-cluster/') ? 'on-cluster/' : file.startsWith('test/cluster-') ? 'cluster-*' : 'others');
console.log(`${rows.length} test files: ${sum(rows, 'cpuS').toFixed(0)} CPU-s, ${sum(rows, 'wallS').toFixed(0)} s of their own wall time`);
const spawned = rows.reduce((total, row) => {
  for (const [what, count] of Object.entries(row.spawned)) total[what] = (total[what] ?? 0) + count;
  return total;
}, {});
console.log(
  `spawned: ${Object.entries(spawned)
    .map(([what, count]) => `${count} ${what}`)
    .join(', ')}`,
);
for (const kind of ['on-cluster/', 'cluster-*', 'others']) {
  const of = rows.filter((row) => kindOf(row.file) === kind);
  console.log(`${kind}: ${of.length} files, ${sum(of, 'cpuS').toFixed(0)} CPU-s, ${sum(of, 'wallS').toFixed(0)} s`);
}
console.log('\n  CPU-s  wall s  CPU/wall  file (serve, node, nats-server started)');
for (const row of rows.sort((a, b) => b.cpuS - a.cpuS).slice(0, 20)) {
  const { serve, node, natsServer } = row.spawned;
  console.log(
    `${row.cpuS.toFixed(1).padStart(7)} ${row.wallS.toFixed(1).padStart(7)} ${(row.cpuS / row.wallS).toFixed(2).padStart(9)}  ${row.file} (${serve}, ${node}, ${natsServer})`,
  );
}
