import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api.js';
import { signKeyToken } from '../crypto.js';
import { kindOf, type Session } from '../session.js';
import { ErrorBox, valueTo } from '../ui.js';

/**
 * Sign in with the operator key (printed once by the node, or --admin-key), a State Backed token, or a
 * key's id and secret (a token is signed here, in the page). The credential is checked with one call
 * before it is kept in this tab's session storage.
 */
export const SignIn = ({ onSignedIn }: { onSignedIn: (session: Session) => void }) => {
  const [mode, setMode] = useState<'credential' | 'key'>('credential');
  const [credential, setCredential] = useState('');
  const [keyId, setKeyId] = useState('');
  const [secret, setSecret] = useState('');
  const [sub, setSub] = useState('statehold-console');
  const [orgId, setOrgId] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      let session: Session;
      if (mode === 'credential') {
        const token = credential.trim();
        if (token === '') throw new Error('Paste the operator key or a token first.');
        session = { token, kind: kindOf(token) };
      } else {
        if (!keyId.trim().startsWith('sbk_') || secret.trim() === '')
          throw new Error('Give the key id (sbk_...) and its secret (sbsec_...).');
        session = { token: await signKeyToken(keyId.trim(), secret.trim(), { sub: sub.trim() || 'statehold-console' }), kind: 'token' };
      }
      if (orgId.trim() !== '') session.orgId = orgId.trim();
      try {
        await api(session, 'GET', '/machines');
      } catch (e) {
        // A credential without machines.read is still one: its pages say what it may not do.
        if (!(e instanceof ApiError && e.code === 'missing-scope')) throw e;
      }
      onSignedIn(session);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return html`<main class="sign-in">
    <h1>Statehold console</h1>
    <p class="muted">Sign in to manage the machines, instances, logs and keys of this node.</p>
    <div class="tabs" role="tablist">
      <button
        type="button"
        role="tab"
        aria-selected=${mode === 'credential'}
        class=${mode === 'credential' ? 'tab selected' : 'tab'}
        onClick=${() => setMode('credential')}
      >
        Operator key or token
      </button>
      <button
        type="button"
        role="tab"
        aria-selected=${mode === 'key'}
        class=${mode === 'key' ? 'tab selected' : 'tab'}
        onClick=${() => setMode('key')}
      >
        Key id and secret
      </button>
    </div>
    <form onSubmit=${submit} class="card">
      ${
        mode === 'credential'
          ? html`<label>
              Operator key or State Backed token
              <input
                name="credential"
                type="password"
                autocomplete="off"
                placeholder="shadm_... or eyJ..."
                value=${credential}
                onInput=${valueTo(setCredential)}
              />
              <small>The node prints its operator key once, on its first start (or takes one with <code>--admin-key</code>).</small>
            </label>`
          : html`<label>
                Key id
                <input
                  name="keyId"
                  autocomplete="off"
                  placeholder="sbk_..."
                  value=${keyId}
                  onInput=${valueTo(setKeyId)}
                />
              </label>
              <label>
                Secret
                <input
                  name="secret"
                  type="password"
                  autocomplete="off"
                  placeholder="sbsec_..."
                  value=${secret}
                  onInput=${valueTo(setSecret)}
                />
                <small>A 12-hour token is signed with it here, in the page; the secret is not sent anywhere.</small>
              </label>
              <label>
                Acting as (the <code>sub</code> machines' authorizers see)
                <input name="sub" autocomplete="off" value=${sub} onInput=${valueTo(setSub)} />
              </label>`
      }
      <label>
        Org id <span class="muted">(optional: only for an operator key over several orgs)</span>
        <input
          name="orgId"
          autocomplete="off"
          placeholder="org_..."
          value=${orgId}
          onInput=${valueTo(setOrgId)}
        />
      </label>
      <${ErrorBox} error=${error} />
      <button type="submit" class="primary" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
      <p class="muted small">The credential is kept in this browser tab only (session storage) and goes when the tab closes.</p>
    </form>
  </main>`;
};
