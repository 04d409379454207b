import { connect } from 'node:net';
import { request } from 'undici';

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: any;
}

/** A raw HTTP call, for checks the State Backed client would hide (status codes, headers, bodies). */
export const call = async (
  url: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<HttpResult> => {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | Buffer | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await request(`${url}${path}`, { method: method as any, headers, body });
  const text = await response.body.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.statusCode, headers: response.headers, text, body: parsed };
};

/**
 * Writes `text` (a raw request, or only its head) on a new loopback connection and resolves with all
 * it got back once the node closes the connection, or after `ms`: what a test of answers given
 * before a body is read uses (`announced` bodies are never sent).
 */
export const rawExchange = (port: number, text: string, ms = 3_000): Promise<string> =>
  new Promise((resolve) => {
    let data = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    const timer = setTimeout(() => socket.destroy(), ms);
    socket.on('data', (d) => (data += d.toString()));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(data);
    });
    socket.on('error', () => undefined);
  });
