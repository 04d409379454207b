import { html } from 'htm/preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { Cluster } from './pages/cluster.js';
import { Instance } from './pages/instance.js';
import { Keys } from './pages/keys.js';
import { Logs } from './pages/logs.js';
import { Machine } from './pages/machine.js';
import { Machines } from './pages/machines.js';
import { SignIn } from './pages/sign-in.js';
import { clearSession, loadSession, saveSession, type Session } from './session.js';
import type { OrgListing } from './types.js';
import { useLoad } from './ui.js';

/** The page named by the hash (`#/machines/m/i/i`, `#/logs?machine=m`): no server round trip, so any node path serves. */
const route = (): { parts: string[]; params: URLSearchParams } => {
  const [path = '', search = ''] = location.hash.replace(/^#\/?/, '').split('?');
  return {
    parts: path
      .split('/')
      .filter((p) => p !== '')
      .map(decodeURIComponent),
    params: new URLSearchParams(search),
  };
};

const useRoute = () => {
  const [current, setCurrent] = useState(route);
  useEffect(() => {
    const changed = () => setCurrent(route());
    window.addEventListener('hashchange', changed);
    return () => window.removeEventListener('hashchange', changed);
  }, []);
  return current;
};

const Page = ({ session }: { session: Session }) => {
  const { parts, params } = useRoute();
  const [first, machine, what, instance] = parts;
  useEffect(() => window.scrollTo(0, 0), [parts.join('/')]);
  if (first === undefined || (first === 'machines' && machine === undefined)) return html`<${Machines} session=${session} />`;
  if (first === 'machines' && machine !== undefined && what === undefined)
    return html`<${Machine} key=${machine} session=${session} machine=${machine} />`;
  if (first === 'machines' && machine !== undefined && what === 'i' && instance !== undefined)
    return html`<${Instance} key=${`${machine}/${instance}`} session=${session} machine=${machine} instance=${instance} />`;
  if (first === 'logs') return html`<${Logs} key=${params.toString()} session=${session} params=${params} />`;
  if (first === 'keys') return html`<${Keys} session=${session} />`;
  if (first === 'cluster') return html`<${Cluster} session=${session} />`;
  return html`<section>
    <h1>Not found</h1>
    <p>The console has no page ${location.hash}. <a href="#/">Go to the machines</a>.</p>
  </section>`;
};

/** For the operator: the orgs it may act in, to pick one when there are several. */
const OrgPicker = ({ session, onChange }: { session: Session; onChange: (orgId: string | undefined) => void }) => {
  const orgs = useLoad(
    () => (session.kind === 'operator' ? api<{ orgs: OrgListing[] }>(session, 'GET', '/orgs') : Promise.resolve(undefined)),
    [session.token],
  );
  const list = orgs.data?.orgs ?? [];
  if (list.length < 2) return null;
  return html`<label class="org-picker">
    Org
    <select value=${session.orgId ?? ''} onChange=${(e: Event) => onChange((e.target as HTMLSelectElement).value || undefined)}>
      <option value="">choose…</option>
      ${list.map((org) => html`<option value=${org.id}>${org.name} (${org.id})</option>`)}
    </select>
  </label>`;
};

const App = () => {
  const [session, setSession] = useState<Session | undefined>(loadSession);
  const { parts } = useRoute();
  if (!session)
    return html`<${SignIn}
      onSignedIn=${(s: Session) => {
        saveSession(s);
        setSession(s);
      }}
    />`;
  const signOut = () => {
    clearSession();
    setSession(undefined);
    location.hash = '#/';
  };
  const section = parts[0] ?? 'machines';
  const link = (to: string, label: string) =>
    html`<a href=${`#/${to}`} class=${section === to ? 'selected' : ''} aria-current=${section === to ? 'page' : undefined}>${label}</a>`;
  return html`<div class="shell">
    <header class="top">
      <a class="brand" href="#/">Statehold</a>
      <nav class="main-nav" aria-label="sections">
        ${link('machines', 'Machines')} ${link('logs', 'Logs')} ${link('keys', 'Keys')}
        ${session.kind === 'operator' ? link('cluster', 'Cluster') : null}
      </nav>
      <${OrgPicker}
        session=${session}
        onChange=${(orgId: string | undefined) => {
          const next: Session = { ...session, ...(orgId ? { orgId } : {}) };
          if (!orgId) delete next.orgId;
          saveSession(next);
          setSession(next);
        }}
      />
      <span class="who">${session.kind === 'operator' ? 'operator' : 'token'}${session.orgId ? ` · ${session.orgId}` : ''}</span>
      <button type="button" class="sign-out" onClick=${signOut}>Sign out</button>
    </header>
    <main class="content"><${Page} session=${session} /></main>
  </div>`;
};

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(html`<${App} />`, root);
}
