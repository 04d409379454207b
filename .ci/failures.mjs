#!/usr/bin/env node
// Reads a TAP log (tap's own reporter output, as `make test` prints it in CI) and prints each failed
// assertion with the names of the subtests around it and the first lines of its diagnostic, so that
// the tail of a CI log (all that is kept of a failed run) says which test failed and how.
// Usage: node .ci/failures.mjs LOG [MAX]
import { readFileSync } from 'node:fs';

const [logPath, maxArg] = process.argv.slice(2);
if (!logPath) {
  console.error('usage: node .ci/failures.mjs LOG [MAX]');
  process.exit(2);
}
const max = Number(maxArg ?? 8);
const lines = readFileSync(logPath, 'utf8').split('\n');

const RESULT = /^( *)(not ok|ok) \d+( - (.*?))?( # .*)?$/;
const SUBTEST = /^( *)# Subtest: (.*)$/;
// Diagnostic lines worth a glance: what was found and wanted, an error's message, a diff's changed lines.
const DIAG = /^(found|wanted|doesNotHave|pattern|message|error|code|signal|exitCode|timeout|expired|test):\s*\S/;
const DIFF_LINE = /^[-+](?![-+]{2} )/;
const KEY = /^[A-Za-z]+:/;

/** Open subtests by depth (indent / 4). */
const open = [];
const failures = [];
for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const sub = SUBTEST.exec(line);
  if (sub) {
    const depth = sub[1].length / 4;
    open.length = depth;
    open[depth] = sub[2];
    continue;
  }
  const result = RESULT.exec(line);
  if (!result || result[2] !== 'not ok') continue;
  const depth = result[1].length / 4;
  const path = open.slice(0, depth).concat(result[4] ?? '(unnamed)');
  const diag = [];
  if (lines[i + 1]?.trim() === '---') {
    let file;
    let lineNumber;
    let inDiff = false;
    for (let j = i + 2; j < lines.length && lines[j].trim() !== '...'; j++) {
      const text = lines[j].trim();
      file ??= /^fileName: (.*)$/.exec(text)?.[1];
      lineNumber ??= /^lineNumber: (\d+)$/.exec(text)?.[1];
      if (KEY.test(text)) inDiff = text.startsWith('diff:');
      const worth = DIAG.test(text) || (inDiff && DIFF_LINE.test(text));
      if (worth && diag.length < 5) diag.push(text.slice(0, 200));
    }
    if (file) diag.unshift(`at ${file}${lineNumber ? `:${lineNumber}` : ''}`);
  }
  failures.push({ depth, path, diag });
}

// A failed subtest is reported after its failed children: keep only the innermost failures.
const leaves = failures.filter((failure, index) => {
  const before = failures[index - 1];
  return !(before && before.depth > failure.depth && failure.path.every((name, k) => before.path[k] === name));
});

if (leaves.length > 0) {
  console.log(`failed (${leaves.length}${leaves.length > max ? `, the first ${max}` : ''}):`);
  for (const leaf of leaves.slice(0, max)) {
    console.log(`- ${leaf.path.join(' > ')}`);
    for (const line of leaf.diag) console.log(`    ${line}`);
  }
}
