import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import t from 'tap';
import { nodeVersionProblem, SUPPORTED_NODE } from '../src/bin/node-version.js';
import { repoRoot } from './helpers/paths.js';

/** The version check `statehold` makes at start (exit 2 with its message): this host has one Node, so unit-tested. */

t.test('Node.js releases without zlib.crc32, or older than undici 7 needs, are refused', async (t) => {
  for (const version of [
    '18.20.4',
    '20.0.0',
    '20.14.0',
    '20.15.0',
    '20.18.0',
    '21.7.3',
    '22.0.0',
    '22.1.0',
    'v20.11.1',
    'not a version',
    '',
  ]) {
    const problem = nodeVersionProblem(version);
    t.type(problem, 'string', `${version || '(empty)'}: refused`);
    t.match(problem, /needs Node\.js 20\.18\.1 or a later 20, or 22\.2\.0 or later/, 'saying what it needs');
    if (version !== '') t.match(problem, version, 'and naming the version it found');
  }
});

t.test('later releases are accepted', async (t) => {
  for (const version of ['20.18.1', '20.18.2', '20.20.2', 'v20.19.0', '22.2.0', '22.12.0', '23.0.0', '24.3.1', '30.0.0-pre']) {
    t.equal(nodeVersionProblem(version), undefined, version);
  }
  t.equal(nodeVersionProblem(process.versions.node), undefined, `this host's ${process.versions.node}`);
});

t.test('package.json states the same floor', async (t) => {
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
  t.equal(manifest.engines.node, SUPPORTED_NODE);
});

/**
 * The check runs in main, after the entry's static imports are linked: none of them may (through
 * their own static imports) reach a module that imports zlib's crc32, or an old Node would fail to
 * link it before the check could say why.
 */
t.test('the entry point loads nothing that needs a newer Node before the check', async (t) => {
  /** The src modules a module's static imports reach (type-only imports are erased by tsc). */
  const staticallyReached = (entry: string): Set<string> => {
    const reached = new Set<string>();
    const walk = (file: string) => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const match of readFileSync(file, 'utf8').matchAll(/^import\s+(?:(?!type\b)[^;]*?from\s+)?'(\.[^']+)\.js';/gms)) {
        walk(resolve(dirname(file), `${match[1]}.ts`));
      }
    };
    walk(join(repoRoot, entry));
    return reached;
  };
  const importsCrc32 = (file: string) => /^import\s[^;]*\bcrc32\b[^;]*from\s+'node:zlib'/m.test(readFileSync(file, 'utf8'));

  const viaNode = [...staticallyReached('src/bin/embedded-node.ts')].filter(importsCrc32);
  t.same(
    viaNode.map((file) => file.slice(repoRoot.length + 1)),
    ['src/store/lmdb/write-ahead-log.ts'],
    "the check finds the embedded node's crc32 import",
  );

  const beforeCheck = staticallyReached('src/bin/statehold.ts');
  t.ok(beforeCheck.size > 3, `follows the entry's imports (${beforeCheck.size} modules)`);
  t.notOk(beforeCheck.has(join(repoRoot, 'src/bin/embedded-node.ts')), 'the embedded node is imported only after the check');
  t.notOk(beforeCheck.has(join(repoRoot, 'src/bin/cluster-node.ts')), 'the cluster node too');
  t.same([...beforeCheck].filter(importsCrc32), [], 'no module the entry loads first imports crc32');
});
