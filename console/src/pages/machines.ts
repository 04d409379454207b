import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, query } from '../api.js';
import type { Session } from '../session.js';
import type { MachineListing } from '../types.js';
import { ErrorBox, href, useLoad, when, Pager } from '../ui.js';

/** Every machine of the org, a page at a time. */
export const Machines = ({ session }: { session: Session }) => {
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const page = useLoad(
    () => api<{ machines: MachineListing[]; cursor?: string }>(session, 'GET', `/machines${query({ cursor })}`),
    [session, cursor],
  );
  return html`<section>
    <h1>Machines</h1>
    <p class="muted">
      Deploy machines with the State Backed client or <code>smply</code> (see the README); open one to see its versions and instances.
    </p>
    <${ErrorBox} error=${page.error} />
    ${
      page.data &&
      (page.data.machines.length === 0 && cursors.length === 0
        ? html`<p class="empty">No machines yet.</p>`
        : html`<table class="list" aria-label="machines">
            <thead>
              <tr>
                <th>Machine</th>
                <th>Current version</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              ${page.data.machines.map(
                (m) =>
                  html`<tr key=${m.slug}>
                    <td><a href=${href('machines', m.slug)}>${m.slug}</a></td>
                    <td>
                      ${m.currentVersion ? html`${m.currentVersion.clientInfo || html`<span class="muted">(no client info)</span>`} <code class="id">${m.currentVersion.id}</code>` : html`<span class="muted">none</span>`}
                    </td>
                    <td>${when(m.createdAt)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`)
    }
    <${Pager} cursors=${cursors} setCursors=${setCursors} next=${page.data?.cursor} />
  </section>`;
};
