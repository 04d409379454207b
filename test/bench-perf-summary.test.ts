import t from 'tap';
import { parsePerfScript, placeOf, summarizePerf } from '../bench/perf-summary.mjs';
import { repoRoot } from './helpers/paths.js';

/** `perf script -F comm,pid,tid,ip,sym,dso` output of four samples in three threads, as perf writes it. */
const SCRIPT = `node 100/100 
\t    7f31e005faac Builtins_LoadIC (/usr/bin/node)
\t    7f31e005fb00 JS:*commit file://${repoRoot}/dist/store/lmdb/lmdb-instance-store.js:130:17 (/tmp/perf-100.map)
\t    7f31e005fc00 JS:^dispatch file://${repoRoot}/dist/api/http-server.js:126:19 (/tmp/perf-100.map)

node 100/100 
\t    ffffffff8225f42b tcp_sendmsg ([kernel.kallsyms])
\t    ffffffff8225f42c entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])

node 100/107 
\t           c3f79 v8::internal::Scavenger::ScavengePage (/usr/bin/node)

swapper     0/0     
\t    ffffffff8225f42b pv_native_safe_halt ([kernel.kallsyms])

node 100/100 
\t    7f31e005faac JS:*commit file://${repoRoot}/dist/store/lmdb/lmdb-instance-store.js:130:17 (/tmp/perf-100.map)
`;

t.test('bench/perf-summary.mjs reads perf script output and places each sample', async (t) => {
  const samples = parsePerfScript(SCRIPT);
  t.same(
    samples.map((s) => `${s.comm} ${s.pid}/${s.tid}`),
    ['node 100/100', 'node 100/100', 'node 100/107', 'swapper 0/0', 'node 100/100'],
  );
  t.same(
    samples.map(placeOf),
    [
      'commit dist/store/lmdb/lmdb-instance-store.js:130:17',
      '(native) tcp_sendmsg [kernel]',
      '(native) v8::internal::Scavenger::ScavengePage',
      '(native) pv_native_safe_halt [kernel]',
      'commit dist/store/lmdb/lmdb-instance-store.js:130:17',
    ],
    'the first JS frame (tier marks and the repository path dropped), else the native leaf',
  );
  const summary = summarizePerf(samples, { threads: 1, top: 5 });
  t.match(summary, /5 samples/);
  t.match(summary, /\| node 100\/100 \| 3 \| 60\.0 % \|/, 'samples per thread, busiest first');
  t.match(summary, /\| 66\.7 % \| `commit dist\/store\/lmdb\/lmdb-instance-store\.js:130:17` \|/, 'the places of the busiest thread');
  t.notMatch(summary, /\*\*node 100\/107\*\*/, 'only the busiest threads are broken down');
});
