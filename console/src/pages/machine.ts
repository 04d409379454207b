import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, enc, query } from '../api.js';
import type { Session } from '../session.js';
import type { InstanceListing, MachineRecord, VersionInfo } from '../types.js';
import { ErrorBox, href, useAction, useLoad, when, Pager, valueTo } from '../ui.js';

/** A machine: its versions (which is current) and its instances, found by name prefix or an index. */
export const Machine = ({ session, machine }: { session: Session; machine: string }) => {
  const record = useLoad(() => api<{ machine: MachineRecord }>(session, 'GET', `/machines/${enc(machine)}`), [session, machine]);
  const current = record.data?.machine.currentVersion?.id;
  return html`<section>
    <nav class="crumbs"><a href="#/">Machines</a> › <span>${machine}</span></nav>
    <h1>${machine}</h1>
    <${ErrorBox} error=${record.error} />
    ${
      record.data &&
      html`<p class="muted">
        Created ${when(record.data.machine.createdAt)}.
        ${record.data.machine.indexes.length > 0 ? ` Indexes: ${record.data.machine.indexes.join(', ')}. ` : ' No indexes. '}
        <a href=${`#/logs?machine=${enc(machine)}`}>Logs of this machine</a>
      </p>`
    }
    <${Versions} session=${session} machine=${machine} current=${current} />
    <${Instances} session=${session} machine=${machine} indexes=${record.data?.machine.indexes ?? []} />
  </section>`;
};

const Versions = ({ session, machine, current }: { session: Session; machine: string; current?: string }) => {
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const page = useLoad(
    () => api<{ versions: VersionInfo[]; cursor?: string }>(session, 'GET', `/machines/${enc(machine)}/v${query({ cursor })}`),
    [session, machine, cursor],
  );
  return html`<h2>Versions</h2>
    <${ErrorBox} error=${page.error} />
    ${
      page.data &&
      html`<table class="list" aria-label="versions">
        <thead>
          <tr>
            <th>Version</th>
            <th>Client info</th>
            <th>Created</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          ${page.data.versions.map(
            (v) =>
              html`<tr key=${v.id}>
                <td><code class="id">${v.id}</code></td>
                <td>${v.clientInfo || html`<span class="muted">—</span>`}</td>
                <td>${when(v.createdAt)}</td>
                <td>${v.id === current ? html`<span class="badge current">current</span>` : null}</td>
              </tr>`,
          )}
        </tbody>
      </table>`
    }
    ${
      (cursors.length > 0 || page.data?.cursor) &&
      html`<${Pager} cursors=${cursors} setCursors=${setCursors} next=${page.data?.cursor} what="versions page" />`
    }`;
};

type Search = { kind: 'prefix'; prefix: string } | { kind: 'index'; index: string; op: string; value: string; dir: string };

interface InstancesPage {
  instances: Array<InstanceListing | { slug: string; indexValue: string }>;
  cursor?: string;
}

const Instances = ({ session, machine, indexes }: { session: Session; machine: string; indexes: string[] }) => {
  const [search, setSearch] = useState<Search>({ kind: 'prefix', prefix: '' });
  const [draft, setDraft] = useState<Search>({ kind: 'prefix', prefix: '' });
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const page = useLoad(() => {
    if (search.kind === 'prefix')
      return api<InstancesPage>(session, 'GET', `/machines/${enc(machine)}/i${query({ prefix: search.prefix, cursor })}`);
    const filtered = search.value !== '' || search.op !== '' ? { op: search.op || 'eq', value: search.value } : {};
    return api<InstancesPage>(
      session,
      'GET',
      `/machines/${enc(machine)}/indexes/${enc(search.index)}/query${query({ ...filtered, dir: search.dir, cursor })}`,
    );
  }, [session, machine, JSON.stringify(search), cursor]);

  const find = (event: Event) => {
    event.preventDefault();
    setCursors([]);
    setSearch(draft);
  };
  const field = (name: string) => valueTo((value) => setDraft({ ...draft, [name]: value } as Search));

  return html`<h2>Instances</h2>
    <form class="toolbar" onSubmit=${find} aria-label="find instances">
      <label class="inline">
        Find by
        <select
          name="searchKind"
          value=${draft.kind}
          onChange=${(e: Event) => {
            const kind = (e.target as HTMLSelectElement).value;
            setDraft(
              kind === 'index' ? { kind: 'index', index: indexes[0] ?? '', op: '', value: '', dir: 'asc' } : { kind: 'prefix', prefix: '' },
            );
          }}
        >
          <option value="prefix">name prefix</option>
          <option value="index" disabled=${indexes.length === 0}>index query${indexes.length === 0 ? ' (no indexes)' : ''}</option>
        </select>
      </label>
      ${
        draft.kind === 'prefix'
          ? html`<input name="prefix" placeholder="name starts with…" value=${draft.prefix} onInput=${field('prefix')} />`
          : html`<select name="index" value=${draft.index} onChange=${field('index')}>
                ${indexes.map((i) => html`<option value=${i}>${i}</option>`)}
              </select>
              <select name="op" value=${draft.op} onChange=${field('op')}>
                <option value="">(all, in index order)</option>
                ${['eq', 'ne', 'gt', 'gte', 'lt', 'lte'].map((op) => html`<option value=${op}>${op}</option>`)}
              </select>
              <input name="value" placeholder="value" value=${draft.value} onInput=${field('value')} />
              <select name="dir" value=${draft.dir} onChange=${field('dir')}>
                <option value="asc">ascending</option>
                <option value="desc">descending</option>
              </select>`
      }
      <button type="submit">Find</button>
    </form>
    <${ErrorBox} error=${page.error} />
    ${
      page.data &&
      (page.data.instances.length === 0
        ? html`<p class="empty">
            No instances${search.kind === 'prefix' && search.prefix ? ` whose name starts with ${search.prefix}` : ''}.
          </p>`
        : html`<table class="list" aria-label="instances">
            <thead>
              <tr>
                ${
                  search.kind === 'index'
                    ? html`<th>Instance</th>
                        <th>Index value</th>`
                    : html`<th>Instance</th>
                        <th>Status</th>
                        <th>Version</th>
                        <th>Created</th>`
                }
              </tr>
            </thead>
            <tbody>
              ${page.data.instances.map((i, n) =>
                'indexValue' in i
                  ? html`<tr key=${`${i.slug}:${n}`}>
                      <td><a href=${href('machines', machine, 'i', i.slug)}>${i.slug}</a></td>
                      <td>${i.indexValue}</td>
                    </tr>`
                  : html`<tr key=${i.slug}>
                      <td><a href=${href('machines', machine, 'i', i.slug)}>${i.slug}</a></td>
                      <td><span class=${`badge ${i.status}`}>${i.status}</span></td>
                      <td>${i.machineVersion.clientInfo || html`<code class="id">${i.machineVersion.id}</code>`}</td>
                      <td>${when(i.createdAt)}</td>
                    </tr>`,
              )}
            </tbody>
          </table>`)
    }
    <${Pager} cursors=${cursors} setCursors=${setCursors} next=${page.data?.cursor} />
    <${CreateInstance} session=${session} machine=${machine} />`;
};

const CreateInstance = ({ session, machine }: { session: Session; machine: string }) => {
  const [slug, setSlug] = useState('');
  const [context, setContext] = useState('{}');
  const action = useAction();
  const create = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(context.trim() === '' ? '{}' : context);
      } catch (e) {
        throw new Error(`The context is not valid JSON: ${(e as Error).message}`);
      }
      await api(session, 'POST', `/machines/${enc(machine)}`, { slug: slug.trim(), context: parsed });
      location.hash = href('machines', machine, 'i', slug.trim());
    });
  };
  return html`<details class="card">
    <summary>Create an instance</summary>
    <form onSubmit=${create} aria-label="create an instance">
      <label
        >Name
        <input
          name="slug"
          placeholder="letters, digits, _ and -"
          value=${slug}
          onInput=${valueTo(setSlug)}
      /></label>
      <label
        >Initial context (JSON)
        <textarea
          name="context"
          rows="3"
          value=${context}
          onInput=${valueTo(setContext)}
        ></textarea>
      </label>
      <${ErrorBox} error=${action.error} />
      <button type="submit" class="primary" disabled=${action.busy}>Create</button>
    </form>
  </details>`;
};
