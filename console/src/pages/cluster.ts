import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, query } from '../api.js';
import type { Session } from '../session.js';
import { ErrorBox, Json, useLoad, when, valueTo } from '../ui.js';

interface ClusterStatus {
  nodeId: string;
  cluster: string;
  replicas: number;
  nats: string;
  state: string;
  members: Array<{ id: string; url: string; startedAt: number; lastSeenAt: number; state: string; warm: string[] } | null>;
  appliedSeq: { meta: number; logs: number };
  partitions: { count: number; held: Array<{ partition: number; ready: boolean; appliedSeq: number }> };
  heldInstances: number;
  storedInstances: number;
  outboxEntries: number;
  instance?: { orgId: string; machine: string; name: string; owner?: string };
}

/** The cluster as this node sees it (GET /cluster, operator only): members, log positions, partitions, an instance's owner. */
export const Cluster = ({ session }: { session: Session }) => {
  const status = useLoad(() => api<ClusterStatus>(session, 'GET', '/cluster'), [session]);
  const [lookup, setLookup] = useState('');
  const [owner, setOwner] = useState<{ data?: ClusterStatus; error?: unknown }>({});
  const find = async (event: Event) => {
    event.preventDefault();
    try {
      setOwner({ data: await api<ClusterStatus>(session, 'GET', `/cluster${query({ instance: lookup.trim() })}`) });
    } catch (error) {
      setOwner({ error });
    }
  };
  const s = status.data;
  return html`<section>
    <h1>Cluster</h1>
    <${ErrorBox} error=${status.error} />
    ${
      s &&
      html`<p>
          This node is <strong data-testid="node-id">${s.nodeId}</strong> (${s.state}) in cluster <strong>${s.cluster}</strong>${`, NATS ${s.nats}, ${s.replicas} replicas. `}
          <button type="button" onClick=${status.reload}>Refresh</button>
        </p>
        <h2>Members</h2>
        <table class="list" aria-label="members">
          <thead>
            <tr>
              <th>Node</th>
              <th>State</th>
              <th>URL</th>
              <th>Started</th>
              <th>Last seen</th>
            </tr>
          </thead>
          <tbody>
            ${s.members
              .filter((m) => m !== null)
              .map(
                (m) =>
                  html`<tr key=${m.id}>
                    <td>${m.id}${m.id === s.nodeId ? html` <span class="badge current">this node</span>` : null}</td>
                    <td>${m.state}${m.warm.length > 0 ? ` (warm for ${m.warm.join(', ')})` : ''}</td>
                    <td><a href=${`${m.url}/console/`}>${m.url}</a></td>
                    <td>${when(m.startedAt)}</td>
                    <td>${when(m.lastSeenAt)}</td>
                  </tr>`,
              )}
          </tbody>
        </table>
        <h2>Log positions</h2>
        <dl class="facts">
          <dt>Org, key, machine and version log (META) applied up to</dt>
          <dd data-testid="meta-seq">${s.appliedSeq.meta}</dd>
          <dt>Instance logs applied up to</dt>
          <dd>${s.appliedSeq.logs}</dd>
          <dt>Partitions held</dt>
          <dd>${s.partitions.held.length} of ${s.partitions.count}</dd>
          <dt>Instances held</dt>
          <dd>${s.heldInstances} (stored: ${s.storedInstances})</dd>
          <dt>Outbox entries</dt>
          <dd>${s.outboxEntries}</dd>
        </dl>
        <details>
          <summary>Partitions this node holds</summary>
          <table class="list">
            <thead>
              <tr>
                <th>Partition</th>
                <th>Ready</th>
                <th>Applied up to</th>
              </tr>
            </thead>
            <tbody>
              ${s.partitions.held.map(
                (p) =>
                  html`<tr key=${p.partition}>
                    <td>${p.partition}</td>
                    <td>${p.ready ? 'yes' : 'catching up'}</td>
                    <td>${p.appliedSeq}</td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </details>`
    }
    <h2>Who owns an instance</h2>
    <form class="toolbar" onSubmit=${find} aria-label="find an instance's owner">
      <input
        name="instanceKey"
        size="50"
        placeholder="org_.../machine/instance"
        value=${lookup}
        onInput=${valueTo(setLookup)}
      />
      <button type="submit">Find owner</button>
    </form>
    <${ErrorBox} error=${owner.error} />
    ${owner.data?.instance && html`<p data-testid="owner-answer">Owned by <strong>${owner.data.instance.owner ?? 'nobody now'}</strong>.</p>`}
    ${
      s &&
      html`<details>
        <summary>Raw status</summary>
        <${Json} value=${s} />
      </details>`
    }
  </section>`;
};
