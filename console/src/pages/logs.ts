import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import type { Session } from '../session.js';
import type { LogEntry } from '../types.js';
import { ErrorBox, when, valueTo } from '../ui.js';

const SINCE: Record<string, number> = { '15 minutes': 15 * 60_000, '1 hour': 3_600_000, '24 hours': 86_400_000, '7 days': 7 * 86_400_000 };
const MAX_SHOWN = 2_000;
const WATCH_EVERY_MS = 2_000;

/**
 * Machine code's console output (GET /logs), of a machine or one instance; watching polls from where
 * the last answer ended (its maxTimestamp), as the client's logs.watch does, every 2 s.
 */
export const Logs = ({ session, params }: { session: Session; params: URLSearchParams }) => {
  const [machine, setMachine] = useState(params.get('machine') ?? '');
  const [instance, setInstance] = useState(params.get('instance') ?? '');
  const [since, setSince] = useState('1 hour');
  const [entries, setEntries] = useState<LogEntry[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [watching, setWatching] = useState(false);
  const [loaded, setLoaded] = useState(false);
  const position = useRef<string>('');
  const run = useRef(0);

  const fetchFrom = async (from: string, round: number): Promise<boolean> => {
    const page = await api<{ logs: LogEntry[]; maxTimestamp: string }>(
      session,
      'GET',
      `/logs${query({ from, machine: machine.trim(), instance: machine.trim() ? instance.trim() : undefined })}`,
    );
    if (round !== run.current) return false;
    position.current = page.maxTimestamp;
    if (page.logs.length > 0) setEntries((shown) => [...shown, ...page.logs].slice(-MAX_SHOWN));
    return page.logs.length >= 100;
  };

  const load = async (event?: Event) => {
    event?.preventDefault();
    const round = ++run.current;
    setEntries([]);
    setError(undefined);
    setLoaded(false);
    try {
      let more = await fetchFrom(new Date(Date.now() - (SINCE[since] ?? 3_600_000)).toISOString(), round);
      // A busy hour may need several calls (100 entries each): a few, then watching goes on from there.
      for (let i = 0; more && i < 10; i++) more = await fetchFrom(position.current, round);
      setLoaded(true);
    } catch (e) {
      setError(e);
    }
  };

  useEffect(() => {
    void load();
    // (loaded once on opening; the form loads again)
  }, [session]);

  useEffect(() => {
    if (!watching || !loaded) return;
    const round = run.current;
    let stopped = false;
    let timer: number | undefined;
    const tick = async () => {
      try {
        let more = true;
        for (let i = 0; more && i < 10 && !stopped; i++) more = await fetchFrom(position.current, round);
        setError(undefined);
      } catch (e) {
        setError(e);
      }
      if (!stopped) timer = window.setTimeout(() => void tick(), WATCH_EVERY_MS);
    };
    timer = window.setTimeout(() => void tick(), WATCH_EVERY_MS);
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  }, [watching, loaded, session]);

  return html`<section>
    <h1>Logs</h1>
    <form class="toolbar" onSubmit=${load} aria-label="log filters">
      <input
        name="machine"
        placeholder="machine (all)"
        value=${machine}
        onInput=${valueTo(setMachine)}
      />
      <input
        name="instance"
        placeholder="instance (all)"
        value=${instance}
        disabled=${machine.trim() === ''}
        onInput=${valueTo(setInstance)}
      />
      <label class="inline">
        from the last
        <select name="since" value=${since} onChange=${valueTo(setSince)}>
          ${Object.keys(SINCE).map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
      </label>
      <button type="submit">Show</button>
      <label class="inline watch">
        <input
          type="checkbox"
          name="watch"
          checked=${watching}
          onChange=${(e: Event) => setWatching((e.target as HTMLInputElement).checked)}
        />
        Watch live
      </label>
    </form>
    <${ErrorBox} error=${error} />
    ${loaded && entries.length === 0 && html`<p class="empty">No logs in this window${watching ? ' yet: watching for new ones' : ''}.</p>`}
    ${
      entries.length > 0 &&
      html`<table class="list logs" aria-label="logs">
        <thead>
          <tr>
            <th>Time</th>
            <th>Machine</th>
            <th>Instance</th>
            <th>Output</th>
            <th>Log</th>
          </tr>
        </thead>
        <tbody>
          ${entries.map(
            (entry, i) =>
              html`<tr key=${`${entry.timestamp}:${i}`} class=${entry.outputType}>
                <td class="nowrap">${when(entry.timestamp)}</td>
                <td>${entry.machineName}</td>
                <td>${entry.instanceName}</td>
                <td>${entry.outputType}</td>
                <td><pre class="log">${entry.log}</pre></td>
              </tr>`,
          )}
        </tbody>
      </table>`
    }
  </section>`;
};
