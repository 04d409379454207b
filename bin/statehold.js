#!/usr/bin/env -S node --no-node-snapshot --initial-old-space-size=160
// The `statehold` command. The code lives in dist/ (built by `make build`). The flags on the first line are
// the node's (README, Configuration): isolated-vm needs --no-node-snapshot; the old-generation floor
// makes the node's full garbage collections rarer.
import { existsSync } from 'node:fs';
const entry = new URL('../dist/bin/statehold.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('statehold: not built yet: run `make build` in the repository first\n');
  process.exit(1);
}
await import(entry.href);
