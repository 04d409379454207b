import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { api, enc, query } from '../api.js';
import { deletionConfirmation } from '../crypto.js';
import type { MachineDefinition } from '../definition.js';
import { type InstanceUpdate, type LiveStatus, watchInstance } from '../realtime.js';
import type { Session } from '../session.js';
import { Statechart } from '../statechart.js';
import type { AdminState, OrgListing, Transition, VersionInfo } from '../types.js';
import { ErrorBox, href, Json, useAction, useLoad, when, valueTo } from '../ui.js';

/** Definitions never change for a version: fetched once per page load. */
const definitions = new Map<string, Promise<{ definition: MachineDefinition }>>();

/**
 * One instance, live: its state and public context as `/rt` pushes them, its full context re-read
 * after each push, its statechart with the active states highlighted, its history, and what an
 * operator does to it (send an event, pause or resume, set the desired version, delete).
 */
export const Instance = ({ session, machine, instance }: { session: Session; machine: string; instance: string }) => {
  const base = `/machines/${enc(machine)}/i/${enc(instance)}`;
  const [live, setLive] = useState<InstanceUpdate | undefined>(undefined);
  const [liveStatus, setLiveStatus] = useState<LiveStatus>('connecting');
  const [liveError, setLiveError] = useState<string | undefined>(undefined);
  const [historyRound, setHistoryRound] = useState(0);
  const admin = useLoad(() => api<AdminState>(session, 'GET', `${base}/admin`), [session, base, live?.ts]);

  useEffect(() => {
    setLive(undefined);
    setLiveError(undefined);
    return watchInstance(session, machine, instance, {
      update: (update) => {
        setLive((previous) => (previous && previous.ts > update.ts ? previous : update));
        setHistoryRound((r) => r + 1);
      },
      error: setLiveError,
      status: setLiveStatus,
    });
  }, [session, machine, instance]);

  const adminData = admin.data;
  const versionId = adminData?.machineVersion.id;
  const definition = useLoad(() => {
    if (!versionId) return Promise.resolve(undefined);
    const key = `${machine}/${versionId}`;
    let pending = definitions.get(key);
    if (!pending) {
      pending = api<{ definition: MachineDefinition }>(session, 'GET', `/machines/${enc(machine)}/v/${enc(versionId)}/definition`);
      pending.catch(() => definitions.delete(key));
      definitions.set(key, pending);
    }
    return pending;
  }, [session, machine, versionId]);

  const stateValue = live?.state ?? adminData?.state;
  const gone = admin.error && (admin.error as { status?: number }).status === 404;

  return html`<section>
    <nav class="crumbs"><a href="#/">Machines</a> › <a href=${href('machines', machine)}>${machine}</a> › <span>${instance}</span></nav>
    <h1>
      ${instance}
      <span class=${`live-indicator ${liveStatus}`} data-live=${liveStatus} title="updates over the /rt websocket"
        >${liveStatus === 'live' ? '● live' : liveStatus === 'connecting' ? '○ connecting' : '○ reconnecting'}</span
      >
    </h1>
    <${ErrorBox} error=${admin.error} />
    ${liveError && html`<div class="error" role="alert"><strong>${liveError}</strong></div>`}
    ${
      !gone &&
      html`<div class="grid">
          <div class="card">
            <h2>State</h2>
            <dl class="facts">
              <dt>State</dt>
              <dd>
                <code class="state-value" data-testid="state-value">${stateValue === undefined ? '…' : JSON.stringify(stateValue)}</code>
              </dd>
              <dt>Status</dt>
              <dd>
                ${adminData ? html`<span class=${`badge ${adminData.status}`} data-testid="status">${adminData.status}</span>` : '…'}
                ${(live?.done ?? adminData?.done) ? html`<span class="badge done">done</span>` : null}
              </dd>
              <dt>Tags</dt>
              <dd>
                ${(live?.tags ?? adminData?.tags ?? []).length > 0 ? (live?.tags ?? adminData?.tags ?? []).map((tag) => html`<span class="tag">${tag}</span> `) : html`<span class="muted">none</span>`}
              </dd>
              <dt>Version</dt>
              <dd>
                ${adminData ? html`${adminData.machineVersion.clientInfo} <code class="id">${adminData.machineVersion.id}</code>` : '…'}
              </dd>
              ${
                adminData?.desiredMachineVersion &&
                html`<dt>Desired version</dt>
                  <dd>
                    ${adminData.desiredMachineVersion.clientInfo} <code class="id">${adminData.desiredMachineVersion.id}</code>
                    <span class="muted">(upgrades on its next event)</span>
                  </dd>`
              }
              <dt>Updated</dt>
              <dd>${live ? when(live.ts) : '…'}</dd>
              <dt>Created</dt>
              <dd>${adminData ? when(adminData.createdAt) : '…'}</dd>
              <${Owner} session=${session} machine=${machine} instance=${instance} />
            </dl>
            <p><a href=${`#/logs?machine=${enc(machine)}&instance=${enc(instance)}`}>Logs of this instance</a></p>
          </div>
          <div class="card">
            <h2>Send an event</h2>
            <${SendEvent} session=${session} base=${base} onSent=${admin.reload} />
            <h2>Manage</h2>
            <${Manage} session=${session} machine=${machine} instance=${instance} admin=${adminData} onChanged=${admin.reload} />
          </div>
        </div>
        <div class="card">
          <h2>Statechart</h2>
          <${ErrorBox} error=${definition.error} />
          ${
            definition.data && stateValue !== undefined
              ? html`<${Statechart} definition=${definition.data.definition} value=${stateValue} />
                  ${definition.data.definition.truncated ? html`<p class="muted">The machine is large: only part of it is drawn.</p>` : null}`
              : !definition.error && html`<p class="muted">Loading the machine's definition…</p>`
          }
        </div>
        <div class="grid">
          <div class="card">
            <h2>Public context <span class="muted small">(live)</span></h2>
            <${Json} value=${live?.publicContext} label="public context" />
          </div>
          <div class="card">
            <h2>Full context</h2>
            <${Json} value=${adminData?.context} label="full context" />
          </div>
        </div>
        <${History} session=${session} base=${base} round=${historyRound} />`
    }
  </section>`;
};

const SendEvent = ({ session, base, onSent }: { session: Session; base: string; onSent: () => void }) => {
  const [type, setType] = useState('');
  const [payload, setPayload] = useState('');
  const [result, setResult] = useState<string | undefined>(undefined);
  const action = useAction();
  const send = (event: Event) => {
    event.preventDefault();
    setResult(undefined);
    void action.run(async () => {
      if (type.trim() === '') throw new Error('Give the event type, e.g. TOGGLE.');
      let extra: Record<string, unknown> = {};
      if (payload.trim() !== '') {
        try {
          extra = JSON.parse(payload) as Record<string, unknown>;
        } catch (e) {
          throw new Error(`The payload is not valid JSON: ${(e as Error).message}`);
        }
        if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) throw new Error('The payload must be a JSON object.');
      }
      const answer = await api<{ state: unknown }>(session, 'POST', `${base}/events`, { event: { ...extra, type: type.trim() } });
      setResult(`Sent ${type.trim()}: now ${JSON.stringify(answer.state)}`);
      onSent();
    });
  };
  return html`<form onSubmit=${send} aria-label="send an event">
    <label
      >Event type
      <input
        name="eventType"
        placeholder="e.g. TOGGLE"
        value=${type}
        onInput=${valueTo(setType)}
    /></label>
    <label
      >Payload <span class="muted">(optional JSON object)</span
      ><textarea
        name="payload"
        rows="2"
        placeholder='{"amount": 3}'
        value=${payload}
        onInput=${valueTo(setPayload)}
      ></textarea>
    </label>
    <${ErrorBox} error=${action.error} />
    ${result && html`<p class="ok" role="status">${result}</p>`}
    <button type="submit" class="primary" disabled=${action.busy}>Send event</button>
  </form>`;
};

const Manage = ({
  session,
  machine,
  instance,
  admin,
  onChanged,
}: {
  session: Session;
  machine: string;
  instance: string;
  admin?: AdminState;
  onChanged: () => void;
}) => {
  const base = `/machines/${enc(machine)}/i/${enc(instance)}`;
  const action = useAction();
  const versions = useLoad(() => api<{ versions: VersionInfo[] }>(session, 'GET', `/machines/${enc(machine)}/v`), [session, machine]);
  const [target, setTarget] = useState('');
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState('');
  const [note, setNote] = useState<string | undefined>(undefined);
  const paused = admin?.status === 'paused';
  const setStatus = () =>
    void action.run(async () => {
      await api(session, 'PUT', `${base}/status`, { status: paused ? 'running' : 'paused' });
      setNote(paused ? 'Resumed: events are accepted again.' : 'Paused: events are refused until it is resumed.');
      onChanged();
    });
  const setVersion = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      if (!target) throw new Error('Choose a version first.');
      await api(session, 'PUT', `${base}/v`, { targetMachineVersionId: target });
      setNote('The desired version is set: the instance upgrades on its next event.');
      onChanged();
    });
  };
  const remove = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      const hmac = await deletionConfirmation(machine, instance);
      await api(session, 'DELETE', base, { dangerDataWillBeDeletedForever: true, hmacSha256OfMachineInstanceNameWithMachineNameKey: hmac });
      location.hash = href('machines', machine);
    });
  };
  return html`<div class="manage">
    <button type="button" onClick=${setStatus} disabled=${!admin || action.busy}>${paused ? 'Resume' : 'Pause'}</button>
    <form class="toolbar" onSubmit=${setVersion} aria-label="set the desired version">
      <select name="targetVersion" value=${target} onChange=${valueTo(setTarget)}>
        <option value="">Desired version…</option>
        ${(versions.data?.versions ?? []).map((v) => html`<option value=${v.id}>${v.clientInfo || v.id}${v.id === admin?.machineVersion.id ? ' (its version)' : ''}</option>`)}
      </select>
      <button type="submit" disabled=${action.busy}>Set desired version</button>
    </form>
    ${
      confirming
        ? html`<form class="danger-zone" onSubmit=${remove} aria-label="confirm deletion">
            <p>This deletes <strong>${instance}</strong> with its history, for good. Type its name to confirm.</p>
            <input
              name="confirmName"
              autocomplete="off"
              value=${typed}
              onInput=${valueTo(setTyped)}
            />
            <button type="submit" class="danger" disabled=${typed !== instance || action.busy}>Delete for good</button>
            <button type="button" onClick=${() => setConfirming(false)}>Cancel</button>
          </form>`
        : html`<button type="button" class="danger" onClick=${() => setConfirming(true)}>Delete…</button>`
    }
    <${ErrorBox} error=${action.error ?? versions.error} />
    ${note && !action.error && html`<p class="ok" role="status">${note}</p>`}
  </div>`;
};

/** In a cluster, for the operator: which node runs the instance (GET /cluster?instance=...). */
const Owner = ({ session, machine, instance }: { session: Session; machine: string; instance: string }) => {
  const owner = useLoad(async () => {
    if (session.kind !== 'operator') return undefined;
    // GET /health (no credential) says whether this node is in a cluster: only then is there an owner to ask for.
    const health = (await fetch('/health').then((r) => r.json())) as { cluster?: unknown };
    if (health.cluster === undefined) return undefined;
    let orgId = session.orgId;
    if (!orgId) {
      const orgs = await api<{ orgs: OrgListing[] }>(session, 'GET', '/orgs');
      if (orgs.orgs.length !== 1) return undefined;
      orgId = orgs.orgs[0]?.id;
    }
    const status = await api<{ nodeId: string; instance?: { owner?: string } }>(
      session,
      'GET',
      `/cluster${query({ instance: `${orgId}/${machine}/${instance}` })}`,
    );
    return { owner: status.instance?.owner, asked: status.nodeId };
  }, [session, machine, instance]);
  if (!owner.data) return null;
  return html`<dt>Owner</dt>
    <dd data-testid="owner">${owner.data.owner ?? 'unknown'} <span class="muted small">(asked ${owner.data.asked})</span></dd>`;
};

const History = ({ session, base, round }: { session: Session; base: string; round: number }) => {
  const [pages, setPages] = useState<Array<string | undefined>>([undefined]);
  const cursor = pages.at(-1);
  const page = useLoad(
    () => api<{ transitions: Transition[]; cursor?: string }>(session, 'GET', `${base}/events${query({ cursor })}`),
    [session, base, cursor, round],
  );
  return html`<div class="card">
    <h2>Transition history <span class="muted small">(oldest first, page ${pages.length})</span></h2>
    <${ErrorBox} error=${page.error} />
    ${
      page.data &&
      html`<table class="list" aria-label="transitions">
        <thead>
          <tr>
            <th>When</th>
            <th>Event</th>
            <th>State after</th>
          </tr>
        </thead>
        <tbody>
          ${page.data.transitions.map(
            (t, i) =>
              html`<tr key=${`${t.createdAt}:${i}`}>
                <td>${when(t.createdAt)}</td>
                <td><code>${eventText(t.event)}</code></td>
                <td><code>${JSON.stringify(t.state)}</code></td>
              </tr>`,
          )}
        </tbody>
      </table>`
    }
    <div class="pager">
      <button type="button" disabled=${pages.length <= 1} onClick=${() => setPages(pages.slice(0, -1))}>Previous transitions</button>
      <button type="button" disabled=${!page.data?.cursor} onClick=${() => page.data?.cursor && setPages([...pages, page.data.cursor])}>
        Next transitions
      </button>
    </div>
  </div>`;
};

/** An event as the history shows it: its type alone when it carries nothing else. */
const eventText = (event: unknown): string => {
  if (typeof event === 'string') return event;
  if (
    event !== null &&
    typeof event === 'object' &&
    Object.keys(event).length === 1 &&
    typeof (event as { type?: unknown }).type === 'string'
  )
    return (event as { type: string }).type;
  return JSON.stringify(event);
};
