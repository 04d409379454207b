import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { STATEBACKED_AUDIENCE } from '../auth/authenticator.js';
import { mintStateBackedToken } from '../auth/token-minter.js';
import { isPrettyId } from '../domain/ids.js';
import { ConfigError } from './serve-config.js';

/**
 * `statehold smply-login`: writes the session the real smply 0.1.18 reads (wire-protocol §9.3), so that
 * `smply -u <url> ...` works against a Statehold node without a State Backed account. smply signs in
 * through Supabase and keeps the supabase-js session in `~/.smply/credentials`; gotrue takes a session
 * as valid, and calls nobody, when it has an access token, a refresh token, an `expires_at` more than
 * 90 s away and a `user` object. The access token is what smply sends as its bearer: the operator key
 * as it is, or a token signed with a key (its id and secret), as `@statebacked/token` makes them.
 */

/** The session lasts this long by default; `login` again after. */
const DEFAULT_VALID_DAYS = 365;
const CHECK_TIMEOUT_MS = 10_000;

/** The server could not be asked, or answered what no Statehold node does: exit 1. */
export class LoginCheckFailed extends Error {}

interface LoginOptions {
  url: string;
  /** The operator key, or with keyId a key's secret. */
  key: string;
  keyId: string | undefined;
  org: string | undefined;
  home: string;
  validDays: number;
}

const parseLoginArgs = (argv: string[], env: NodeJS.ProcessEnv): LoginOptions => {
  const { values } = parseArgs({
    args: argv,
    options: {
      url: { type: 'string' },
      key: { type: 'string' },
      'key-id': { type: 'string' },
      org: { type: 'string' },
      home: { type: 'string' },
      'valid-days': { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const url = values.url?.replace(/\/+$/, '');
  if (!url) throw new ConfigError("smply-login: --url is required (the node's URL, e.g. http://127.0.0.1:8787)");
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.search !== '' || parsed.hash !== '')
    throw new ConfigError(`smply-login: --url must be an http(s) URL without query, not "${url}"`);
  const key = values.key;
  if (!key) throw new ConfigError("smply-login: --key is required: the operator key, or a key's secret with --key-id sbk_...");
  if (/\s/.test(key) || key.includes('.'))
    throw new ConfigError('smply-login: --key must be the operator key or a key secret (no spaces, not a token)');
  const keyId = values['key-id'];
  if (keyId !== undefined && !isPrettyId(keyId, 'sbk'))
    throw new ConfigError(`smply-login: --key-id must be a key id (sbk_ and 22 characters), not "${keyId}"`);
  if (keyId === undefined && key.startsWith('sbsec_'))
    throw new ConfigError("smply-login: --key is a key's secret: give its id with --key-id sbk_... too");
  const org = values.org;
  if (org !== undefined && !isPrettyId(org, 'org'))
    throw new ConfigError(`smply-login: --org must be an org id (org_ and 22 characters), not "${org}"`);
  const home = values.home ?? env.HOME;
  if (!home) throw new ConfigError('smply-login: HOME is not set: give --home (smply reads $HOME/.smply)');
  const validDays = values['valid-days'] === undefined ? DEFAULT_VALID_DAYS : Number(values['valid-days']);
  if (!Number.isInteger(validDays) || validDays < 1 || validDays > 3650)
    throw new ConfigError(`smply-login: --valid-days must be an integer from 1 to 3650, not "${values['valid-days']}"`);
  return { url, key, keyId, org, home, validDays };
};

/** The bearer smply will send: the operator key, or a token of the key valid until `expiresAt`. */
const accessTokenOf = (options: LoginOptions, nowSeconds: number, expiresAt: number): string =>
  options.keyId === undefined
    ? options.key
    : mintStateBackedToken(
        { id: options.keyId, secret: Buffer.from(options.key, 'utf8') },
        // (act empty, as the operator's: smply's -a names the auth context per call)
        { act: {}, aud: STATEBACKED_AUDIENCE, iss: 'https://cli.statebacked.dev/', iat: nowSeconds, exp: expiresAt },
      );

/**
 * One call as `smply machines list` makes it: the node must answer it as one, and accept the
 * credential. A key without machines.read is accepted but warned about.
 */
const checkCredential = async (options: LoginOptions, accessToken: string): Promise<string | undefined> => {
  let response: Response;
  try {
    response = await fetch(`${options.url}/machines`, {
      headers: { authorization: `Bearer ${accessToken}`, ...(options.org ? { 'x-statebacked-org-id': options.org } : {}) },
      signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
      redirect: 'manual',
    });
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
    throw new LoginCheckFailed(`smply-login: could not reach ${options.url}: ${cause}; nothing written`);
  }
  const text = await response.text();
  let body: { code?: unknown; error?: unknown; machines?: unknown } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  if (response.status === 200 && Array.isArray(body?.machines)) return undefined;
  const said = typeof body?.error === 'string' ? `: ${body.error.slice(0, 200)}` : '';
  if (response.status === 403 && body?.code === 'missing-scope')
    return `the key is accepted but lacks machines.read: smply's machines commands will be refused${said}`;
  if (response.status === 400 && body?.code === 'specify-org')
    throw new ConfigError('smply-login: this node has several orgs: name one with --org org_...; nothing written');
  if (response.status === 403 && typeof body?.code === 'string')
    throw new ConfigError(`smply-login: ${options.url} refused the key (${body.code}${said}); nothing written`);
  throw new LoginCheckFailed(
    `smply-login: ${options.url} did not answer GET /machines as a Statehold node does (${response.status}); nothing written`,
  );
};

/** Writes `text` to `path` with mode 0600, by a rename so a reader never sees half of it; says what it replaced. */
const replaceFile = async (path: string, text: string): Promise<string | undefined> => {
  const before = await readFile(path, 'utf8').catch(() => undefined);
  const temporary = `${path}.statehold-${process.pid}`;
  await writeFile(temporary, text, { mode: 0o600 });
  await rename(temporary, path);
  return before;
};

/** Runs the command; `say` prints a line. Throws ConfigError (exit 2) or LoginCheckFailed (exit 1), having written nothing. */
export const smplyLogin = async (argv: string[], env: NodeJS.ProcessEnv, say: (line: string) => void): Promise<void> => {
  const options = parseLoginArgs(argv, env);
  const nowSeconds = Math.floor(Date.now() / 1000);
  const expiresIn = options.validDays * 86_400;
  const expiresAt = nowSeconds + expiresIn;
  const accessToken = accessTokenOf(options, nowSeconds, expiresAt);
  const warning = await checkCredential(options, accessToken);

  const session = {
    access_token: accessToken,
    token_type: 'bearer',
    expires_in: expiresIn,
    expires_at: expiresAt,
    // Never used: gotrue refreshes only a session that expires within 90 s (then against supabase.co).
    refresh_token: 'statehold-no-refresh',
    user: {
      id: randomUUID(),
      aud: 'authenticated',
      role: 'authenticated',
      email: 'smply-login@statehold.invalid',
      app_metadata: { provider: 'statehold' },
      user_metadata: { statehold: { url: options.url, ...(options.keyId ? { keyId: options.keyId } : { operator: true }) } },
      created_at: new Date(nowSeconds * 1000).toISOString(),
    },
  };
  const dir = join(options.home, '.smply');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const credentials = join(dir, 'credentials');
  const replaced = await replaceFile(credentials, JSON.stringify(session));
  say(
    `${replaced === undefined ? 'wrote' : 'replaced the session in'} ${credentials} (${options.keyId ? `key ${options.keyId}` : 'the operator key'}, valid ${options.validDays} days)`,
  );

  const defaultOrg = join(dir, 'default-org');
  if (options.org !== undefined) {
    // (no newline: smply sends the file's text as the org header as it is)
    const before = await replaceFile(defaultOrg, options.org);
    say(`${before === undefined ? 'wrote' : `replaced ${JSON.stringify(before.slice(0, 64))} in`} ${defaultOrg}: ${options.org}`);
  } else {
    // As smply's own login does: an org left from another account would be sent with every call.
    const before = await readFile(defaultOrg, 'utf8').catch(() => undefined);
    if (before !== undefined) {
      await rm(defaultOrg, { force: true });
      say(`removed ${defaultOrg} (it named ${JSON.stringify(before.slice(0, 64))}); give --org to set one`);
    }
  }
  if (warning) say(`warning: ${warning}`);
  say(`now: smply -u ${options.url} machines list (on Node 20: NODE_OPTIONS=--experimental-websocket)`);
};
