// What GET /metrics costs the hot path: loaded into the server with
// `BENCH_SERVER_NODE_ARGS="--import ./bench/probes/metrics-scraper.mjs"` (from the repository root, with
// STATEHOLD_METRICS_PUBLIC=on in the environment, which the server inherits), it waits for the server to
// say where it listens and then starts a scraper of its own, a separate process as Prometheus would be,
// that asks for /metrics every SCRAPE_EVERY_MS (1,000) until the server is gone (at most 30 minutes).
// The scraper appends one line per scrape (status, bytes, ms) to SCRAPE_LOG when given.
import { spawn } from 'node:child_process';

const everyMs = Number(process.env.SCRAPE_EVERY_MS ?? 1000);
const scraper = `
const [url, everyMs, log] = process.argv.slice(1);
const { appendFileSync } = await import('node:fs');
const parent = process.ppid;
const until = Date.now() + 30 * 60_000;
const tick = async () => {
  try { process.kill(parent, 0); } catch { process.exit(0); }
  if (Date.now() > until) process.exit(0);
  const started = performance.now();
  try {
    const response = await fetch(url + '/metrics');
    const text = await response.text();
    if (log) appendFileSync(log, response.status + ' ' + text.length + ' ' + (performance.now() - started).toFixed(1) + '\\n');
  } catch (error) {
    if (log) appendFileSync(log, 'error ' + error.message + '\\n');
  }
};
setInterval(tick, Number(everyMs));
`;

const write = process.stdout.write.bind(process.stdout);
let started = false;
process.stdout.write = (chunk, ...rest) => {
  const match = started ? null : /listening on (http:\/\/[^\s"]+)/.exec(String(chunk));
  if (match) {
    started = true;
    const child = spawn(process.execPath, ['--input-type=module', '-e', scraper, match[1], String(everyMs), process.env.SCRAPE_LOG ?? ''], {
      stdio: 'ignore',
    });
    child.unref();
  }
  return write(chunk, ...rest);
};
