#!/usr/bin/env -S node --no-node-snapshot
// The `statehold` command. The code lives in dist/ (built by `make build`); isolated-vm needs --no-node-snapshot.
import { existsSync } from 'node:fs';
const entry = new URL('../dist/bin/statehold.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('statehold: not built yet: run `make build` in the repository first\n');
  process.exit(1);
}
await import(entry.href);
