import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, enc, query } from '../api.js';
import type { Session } from '../session.js';
import type { KeyListing } from '../types.js';
import { allScopes } from '../../../src/domain/scopes.js';
import { ErrorBox, useAction, useLoad, when, Pager, valueTo } from '../ui.js';

/** Every scope a key can have, as the node knows them. */
const SCOPES = allScopes;

/** The org's keys: list, create (the secret shown once), delete. */
export const Keys = ({ session }: { session: Session }) => {
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const page = useLoad(() => api<{ keys: KeyListing[]; cursor?: string }>(session, 'GET', `/keys${query({ cursor })}`), [session, cursor]);
  const [created, setCreated] = useState<{ id: string; key: string } | undefined>(undefined);
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const action = useAction();
  const remove = (id: string) =>
    void action.run(async () => {
      await api(session, 'DELETE', `/keys/${enc(id)}`);
      setDeleting(undefined);
      if (created?.id === id) setCreated(undefined);
      page.reload();
    });
  return html`<section>
    <h1>Keys</h1>
    <p class="muted">A key signs State Backed tokens for your backend or CI; each carries fixed scopes.</p>
    ${
      created &&
      html`<div class="secret card" role="status">
        <h2>Key ${created.id} created</h2>
        <p>Its secret is shown <strong>only this once</strong>: copy it now.</p>
        <code class="secret-value" data-testid="new-secret">${created.key}</code>
        <p>
          <button type="button" onClick=${() => void navigator.clipboard?.writeText(created.key)}>Copy secret</button>
          <button type="button" onClick=${() => setCreated(undefined)}>I have copied it</button>
        </p>
      </div>`
    }
    <${ErrorBox} error=${page.error ?? action.error} />
    ${
      page.data &&
      (page.data.keys.length === 0
        ? html`<p class="empty">No keys yet.</p>`
        : html`<table class="list" aria-label="keys">
            <thead>
              <tr>
                <th>Key id</th>
                <th>Name</th>
                <th>Scopes</th>
                <th>Created</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${page.data.keys.map(
                (k) =>
                  html`<tr key=${k.id}>
                    <td><code class="id">${k.id}</code></td>
                    <td>${k.name}</td>
                    <td class="scopes">${k.scopes.join(', ')}</td>
                    <td>${when(k.createdAt)}</td>
                    <td class="nowrap">
                      ${
                        deleting === k.id
                          ? html`<button type="button" class="danger" disabled=${action.busy} onClick=${() => remove(k.id)}>
                                Delete ${k.name} for good
                              </button>
                              <button type="button" onClick=${() => setDeleting(undefined)}>Cancel</button>`
                          : html`<button
                              type="button"
                              class="danger"
                              aria-label=${`delete key ${k.name}`}
                              onClick=${() => setDeleting(k.id)}
                            >
                              Delete…
                            </button>`
                      }
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`)
    }
    <${Pager} cursors=${cursors} setCursors=${setCursors} next=${page.data?.cursor} />
    <${CreateKey}
      session=${session}
      onCreated=${(k: { id: string; key: string }) => {
        setCreated(k);
        page.reload();
      }}
    />
  </section>`;
};

const CreateKey = ({ session, onCreated }: { session: Session; onCreated: (key: { id: string; key: string }) => void }) => {
  const [name, setName] = useState('');
  const [use, setUse] = useState<'production' | 'ci' | 'scopes'>('production');
  const [scopes, setScopes] = useState<string[]>([]);
  const action = useAction();
  const create = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      const body = use === 'scopes' ? { name: name.trim(), scopes } : { name: name.trim(), use };
      onCreated(await api<{ id: string; key: string }>(session, 'POST', '/keys', body));
      setName('');
    });
  };
  return html`<form class="card" onSubmit=${create} aria-label="create a key">
    <h2>Create a key</h2>
    <label
      >Name
      <input name="keyName" value=${name} placeholder="e.g. backend" onInput=${valueTo(setName)}
    /></label>
    <fieldset>
      <legend>Scopes</legend>
      <label class="inline"
        ><input type="radio" name="use" checked=${use === 'production'} onChange=${() => setUse('production')} /> production (events.write,
        state.read, instances.write, indexes.read)</label
      >
      <label class="inline"
        ><input type="radio" name="use" checked=${use === 'ci'} onChange=${() => setUse('ci')} /> ci (machines and versions: read, write,
        admin)</label
      >
      <label class="inline"
        ><input type="radio" name="use" checked=${use === 'scopes'} onChange=${() => setUse('scopes')} /> choose scopes</label
      >
      ${
        use === 'scopes' &&
        html`<div class="scope-grid">
          ${SCOPES.map(
            (scope) =>
              html`<label class="inline"
                ><input
                  type="checkbox"
                  checked=${scopes.includes(scope)}
                  onChange=${(e: Event) => setScopes((e.target as HTMLInputElement).checked ? [...scopes, scope] : scopes.filter((s) => s !== scope))}
                />
                ${scope}</label
              >`,
          )}
        </div>`
      }
    </fieldset>
    <${ErrorBox} error=${action.error} />
    <button type="submit" class="primary" disabled=${action.busy}>Create key</button>
  </form>`;
};
