// One JSON request over an undici Pool, timed with hrtime; never throws (network errors become `error`).
import { Pool } from 'undici';

export const REQUEST_TIMEOUT_MS = 30_000;

export const makePool = (url, connections) =>
  new Pool(url, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
  });

export const authHeaders = (token) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' });

/** @returns {Promise<{status: number, text: string, ms: number, error?: string}>} status 0 when there was no response. */
export const request = async (pool, method, path, headers, body) => {
  const t0 = process.hrtime.bigint();
  try {
    const res = await pool.request({ method, path, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.body.text();
    return { status: res.statusCode, text, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  } catch (err) {
    return { status: 0, text: '', ms: Number(process.hrtime.bigint() - t0) / 1e6, error: err?.code || err?.name || 'Error' };
  }
};

/** A key for the status/error tally: "200", "409 invalid-state", "error UND_ERR_SOCKET". */
export const outcomeKey = (result) => {
  if (result.status === 0) return `error ${result.error}`;
  if (result.status === 200) return '200';
  let code = '';
  try {
    code = JSON.parse(result.text)?.code ?? '';
  } catch {}
  return code ? `${result.status} ${code}` : String(result.status);
};

export const tally = (counts, key) => {
  counts[key] = (counts[key] ?? 0) + 1;
};
