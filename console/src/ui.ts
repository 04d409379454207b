import { html } from 'htm/preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.js';

/** A failure as the API words it (status and code beside its message). */
export const ErrorBox = ({ error }: { error: unknown }) => {
  if (error === undefined || error === null) return null;
  if (error instanceof ApiError) {
    return html`<div class="error" role="alert">
      <strong>${error.message}</strong>
      <span class="error-code"
        >${error.status > 0 ? `${error.status}` : ''}${error.code ? ` ${error.code}` : ''}${error.parameter ? ` (parameter: ${error.parameter})` : ''}</span
      >
    </div>`;
  }
  return html`<div class="error" role="alert"><strong>${error instanceof Error ? error.message : String(error)}</strong></div>`;
};

/** An input, select or textarea's handler that hands its value to `set` (a state setter). */
export const valueTo =
  (set: (value: string) => void) =>
  (e: Event): void =>
    set((e.target as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement).value);

/** Loads something when its inputs change; `reload` loads it again. */
export const useLoad = <T>(load: () => Promise<T>, inputs: unknown[]) => {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => current && setState({ data, loading: false }),
      (error: unknown) => current && setState({ error, loading: false }),
    );
    return () => {
      current = false;
    };
  }, [...inputs, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload };
};

export const when = (iso: string | number | undefined): string => {
  if (iso === undefined || iso === '') return '';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
};

export const Json = ({ value, label }: { value: unknown; label?: string }) =>
  html`<pre class="json" aria-label=${label}>${value === undefined ? '—' : JSON.stringify(value, null, 2)}</pre>`;

export const href = (...parts: string[]): string => `#/${parts.map(encodeURIComponent).join('/')}`;

/** A button whose action is a promise: disabled while it runs. */
export const useAction = () => {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (action: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
};

/**
 * Previous and next buttons over a list's pages: `cursors` holds the cursor of each page after the
 * first that led to the one shown; `next` is the shown page's cursor (none on the last page).
 */
export const Pager = ({
  cursors,
  setCursors,
  next,
  what = 'page',
}: {
  cursors: string[];
  setCursors: (cursors: string[]) => void;
  next: string | undefined;
  what?: string;
}) =>
  html`<div class="pager">
    <button type="button" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>Previous ${what}</button>
    <button type="button" disabled=${!next} onClick=${() => next && setCursors([...cursors, next])}>Next ${what}</button>
  </div>`;
