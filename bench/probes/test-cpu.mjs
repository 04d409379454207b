// Opt-in probe of the test suite's CPU: loaded in every test process with tap's node-arg
// (`--import=./bench/probes/test-cpu.mjs`), it writes, when the process exits, the CPU it and the
// children it reaped used (/proc/self/stat: utime, stime, cutime, cstime), its own wall time, and what
// it spawned (`statehold serve`, `statehold node`, nats-server, other), to $TEST_CPU_DIR/<pid>.json.
// bench/probes/test-cpu-summary.mjs joins them with the tap log. Children that were never waited for
// (a process killed and left) are not counted. Linux only.
import childProcess from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';

const dir = process.env.TEST_CPU_DIR;
if (dir) {
  mkdirSync(dir, { recursive: true });
  const spawned = { serve: 0, node: 0, natsServer: 0, other: 0 };
  const spawn = childProcess.spawn;
  childProcess.spawn = function (command, args, ...rest) {
    const argv = Array.isArray(args) ? args.map(String) : [];
    if (String(command).includes('nats-server')) spawned.natsServer++;
    else if (argv.some((arg) => arg.endsWith('statehold.js'))) spawned[argv.includes('node') ? 'node' : 'serve']++;
    else spawned.other++;
    return spawn.call(this, command, args, ...rest);
  };
  // (the tests import `spawn` by name: their bindings follow the module's exports only after this)
  syncBuiltinESMExports();
  const startedAt = Date.now();
  const ticksPerSecond = 100;
  process.on('exit', () => {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    const seconds = (i) => Number(fields[i]) / ticksPerSecond;
    writeFileSync(
      join(dir, `${process.pid}.json`),
      JSON.stringify({
        file: process.argv[1],
        selfCpuS: seconds(11) + seconds(12),
        childrenCpuS: seconds(13) + seconds(14),
        wallS: (Date.now() - startedAt) / 1000,
        spawned,
      }),
    );
  });
}
