import type { Session } from './session.js';

/** An answer other than 2xx, with the API's own words (`{error, code, parameter?}`). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code?: string,
    readonly parameter?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The API is the node that served this page: its origin. */
export const apiBase = (): string => location.origin;

/** One API call with the session's credential; 201/204 give undefined, other 2xx their JSON. */
export const api = async <T = unknown>(session: Session, method: string, path: string, body?: unknown): Promise<T> => {
  const headers: Record<string, string> = { authorization: `Bearer ${session.token}` };
  if (session.orgId) headers['x-statebacked-org-id'] = session.orgId;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(`${apiBase()}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new ApiError(`the node could not be reached (${(error as Error).message})`, 0);
  }
  if (response.status === 201 || response.status === 204) return undefined as T;
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const problem = (parsed ?? {}) as { error?: unknown; code?: unknown; parameter?: unknown };
    throw new ApiError(
      typeof problem.error === 'string' ? problem.error : `${response.status} ${response.statusText || 'error'}`,
      response.status,
      typeof problem.code === 'string' ? problem.code : undefined,
      typeof problem.parameter === 'string' ? problem.parameter : undefined,
    );
  }
  return parsed as T;
};

/** A path segment or query value, encoded (names are URL-safe already; this keeps odd input harmless). */
export const enc = encodeURIComponent;

export const query = (params: Record<string, string | undefined>): string => {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== '') search.set(name, value);
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
};
