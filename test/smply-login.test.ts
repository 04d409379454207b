import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { call } from './helpers/http.js';
import { entryPoint, startNode } from './helpers/node-process.js';
import { repoRoot } from './helpers/paths.js';

const smplyBin = join(repoRoot, 'node_modules', 'smply', 'dist', 'index.js');
const loopbackOnly = join(repoRoot, 'test', 'fixtures', 'smply', 'loopback-only.mjs');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, or kills it after `timeoutMs` (then code is null). */
const run = (command: string, args: string[], options: { env: Record<string, string>; cwd?: string; timeoutMs?: number }): Promise<Run> =>
  new Promise((resolve) => {
    const child = execFile(
      command,
      args,
      {
        env: { PATH: process.env.PATH ?? '', ...options.env },
        cwd: options.cwd,
        timeout: options.timeoutMs ?? 60_000,
        killSignal: 'SIGKILL',
      },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
    // smply asks for an email address when it finds no session: end its stdin so it cannot wait for one.
    child.stdin?.end();
  });

const login = (home: string, args: string[]) =>
  run(process.execPath, [entryPoint, 'smply-login', ...args], { env: { HOME: home }, timeoutMs: 30_000 });

/**
 * The real smply 0.1.18, as Node 20 needs it (a global WebSocket), loaded with a guard that makes any
 * host but the loopback unreachable: a smply that would ask supabase.co fails at once.
 */
const smply = (home: string, cwd: string, url: string, args: string[]) =>
  run(process.execPath, ['--experimental-websocket', '--import', loopbackOnly, smplyBin, '-u', url, ...args], { env: { HOME: home }, cwd });

const noNetwork = (t: Test, result: Run, what: string) => {
  t.notMatch(result.stderr, /loopback-only/, `${what}: smply reached for nothing but the node`);
  t.equal(result.code, 0, `${what}: exits 0${result.code === 0 ? '' : `\n${result.stdout}\n${result.stderr}`}`);
};

const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));

/** A loopback port nothing listens on. */
const closedPort = async (): Promise<number> => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
};

const machineSource = `import { createMachine } from 'xstate';
export const allowRead = () => true;
export const allowWrite = () => true;
export default createMachine({ id: 'toggle', initial: 'off', predictableActionArguments: true,
  states: { off: { on: { TOGGLE: 'on' } }, on: { on: { TOGGLE: 'off' } } } });
`;

t.test('statehold smply-login with a key, then the real smply deploys a machine and lists machines and instances', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());
  const created = await call(node.url, 'POST', '/keys', {
    token: node.adminKey as string,
    body: {
      name: 'smply',
      scopes: [
        'machines.read',
        'machines.write',
        'machine-versions.read',
        'machine-versions.write',
        'instances.read',
        'instances.write',
        'state.read',
        'org.keys.write',
      ],
    },
  });
  t.equal(created.status, 200);
  const { id, key } = created.body as { id: string; key: string };

  const home = tempDir('statehold-smply-home-');
  // smply bundles the machine file with esbuild, which resolves xstate from beside it.
  const project = tempDir('statehold-smply-project-');
  t.teardown(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(project, { recursive: true, force: true });
  });
  symlinkSync(join(repoRoot, 'node_modules'), join(project, 'node_modules'), 'dir');
  writeFileSync(join(project, 'toggle.js'), machineSource);

  const wrong = await login(home, ['--url', node.url, '--key-id', id, '--key', `${key}x`]);
  t.equal(wrong.code, 2, 'a wrong secret: exit 2');
  t.match(
    wrong.stderr,
    /^statehold: smply-login: .* refused the key \(unauthorized: invalid token signature\); nothing written\n$/,
    'one clear line',
  );
  t.notOk(existsSync(join(home, '.smply')), 'nothing written');

  const loggedIn = await login(home, ['--url', node.url, '--key-id', id, '--key', key]);
  t.equal(loggedIn.code, 0, loggedIn.stderr);
  t.match(loggedIn.stdout, /wrote .*\.smply\/credentials \(key sbk_/);
  const credentials = join(home, '.smply', 'credentials');
  t.equal(statSync(credentials).mode & 0o777, 0o600, 'credentials: mode 0600');
  t.equal(statSync(join(home, '.smply')).mode & 0o777, 0o700, '~/.smply: mode 0700');
  const session = JSON.parse(readFileSync(credentials, 'utf8')) as { access_token: string; expires_at: number; user: { id: string } };
  t.ok(session.expires_at > Date.now() / 1000 + 300 * 86_400, 'a session that lasts (gotrue would refresh one within 90 s of its end)');
  t.ok(session.user.id, 'with the user object gotrue wants');
  t.equal((await call(node.url, 'GET', '/machines', { token: session.access_token })).status, 200, 'its token is accepted');

  const deployed = await smply(home, project, node.url, ['machines', 'create', '--machine', 'toggle', '--node', './toggle.js']);
  noNetwork(t, deployed, 'machines create');
  t.match(deployed.stdout, /"name": "toggle"/);
  t.match(deployed.stdout, /"machineVersionId": "ver_/);

  const machines = await smply(home, project, node.url, ['machines', 'list']);
  noNetwork(t, machines, 'machines list');
  t.match(JSON.parse(machines.stdout), [{ name: 'toggle', currentVersion: { id: /^ver_/ } }]);

  const instance = await smply(home, project, node.url, [
    'instances',
    'create',
    '--machine',
    'toggle',
    '--instance',
    'lamp',
    '--auth-context',
    '{}',
  ]);
  noNetwork(t, instance, 'instances create');
  t.match(instance.stdout, /"state": "off"/);
  const sent = await smply(home, project, node.url, [
    'instances',
    'send-event',
    '--machine',
    'toggle',
    '--instance',
    'lamp',
    '--event',
    'TOGGLE',
    '--auth-context',
    '{}',
  ]);
  noNetwork(t, sent, 'instances send-event');
  t.match(sent.stdout, /"state": "on"/);

  const instances = await smply(home, project, node.url, ['instances', 'list', '--machine', 'toggle']);
  noNetwork(t, instances, 'instances list');
  t.match(JSON.parse(instances.stdout), [{ name: 'lamp' }]);
});

t.test('the operator key, --org and default-org; what is replaced is said', async (t) => {
  const node = await startNode();
  t.teardown(() => node.stop());
  const home = tempDir('statehold-smply-home-');
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const orgs = await call(node.url, 'GET', '/orgs', { token: node.adminKey as string });
  const orgId = (orgs.body as { orgs: Array<{ id: string }> }).orgs[0]?.id as string;

  const first = await login(home, ['--url', node.url, '--key', node.adminKey as string, '--org', orgId]);
  t.equal(first.code, 0, first.stderr);
  t.match(first.stdout, /wrote .*credentials \(the operator key/);
  const defaultOrg = join(home, '.smply', 'default-org');
  t.equal(readFileSync(defaultOrg, 'utf8'), orgId, 'default-org holds the org id without a newline');
  t.equal(statSync(defaultOrg).mode & 0o777, 0o600);

  const again = await login(home, ['--url', `${node.url}/`, '--key', node.adminKey as string]);
  t.equal(again.code, 0, again.stderr);
  t.match(again.stdout, /replaced the session in .*credentials/, 'says it replaced the session');
  t.match(again.stdout, new RegExp(`removed .*default-org \\(it named "${orgId}"\\)`), 'and what it removed');
  t.notOk(existsSync(defaultOrg));

  const project = tempDir('statehold-smply-project-');
  t.teardown(() => rmSync(project, { recursive: true, force: true }));
  const machines = await smply(home, project, node.url, ['machines', 'list']);
  noNetwork(t, machines, 'machines list with the operator key');
  t.same(JSON.parse(machines.stdout), [], 'no machines yet');

  // Invitations (wire-protocol §3.13): Statehold has no user accounts; smply says why, and what instead.
  for (const args of [
    ['invitations', 'send', '--email', 'someone@example.com', '--role', 'read'],
    ['invitations', 'accept', '-i', 'a-code'],
  ]) {
    const invitation = await smply(home, project, node.url, [...(args[1] === 'send' ? ['-o', orgId] : []), ...args]);
    t.notMatch(invitation.stderr, /loopback-only/);
    t.not(invitation.code, 0, `${args.slice(0, 2).join(' ')} fails`);
    t.match(
      `${invitation.stdout}${invitation.stderr}`,
      /no user accounts, so no org members or invitations: give the person a key/,
      'and says why',
    );
  }
  for (const [method, path] of [
    ['POST', '/org-members'],
    ['PUT', '/invitations/a-code'],
    ['PUT', '/a-code'],
  ] as const)
    t.match(
      await call(node.url, method, path, { token: node.adminKey as string }),
      { status: 404, body: { code: 'not-found', error: /no user accounts/ } },
      `${method} ${path}`,
    );
  t.match(
    await call(node.url, 'PUT', '/machines', { token: node.adminKey as string }),
    { status: 405 },
    'PUT /machines is still a wrong method, not an invitation',
  );

  const wrong = await login(home, ['--url', node.url, '--key', 'not-the-operator-key']);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /refused the key \(unauthorized: invalid credentials\); nothing written/);
  t.equal(
    JSON.parse(readFileSync(join(home, '.smply', 'credentials'), 'utf8')).access_token,
    node.adminKey,
    'the session written before is kept',
  );
});

t.test('bad input is refused with one line and exit 2; an unreachable node with exit 1; nothing is written', async (t) => {
  const home = tempDir('statehold-smply-home-');
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const url = `http://127.0.0.1:${await closedPort()}`;
  const cases: Array<[string[], number, RegExp]> = [
    [['--key', 'k'], 2, /--url is required/],
    [['--url', url], 2, /--key is required/],
    [['--url', 'ftp://x', '--key', 'k'], 2, /--url must be an http\(s\) URL/],
    [['--url', url, '--key', 'sbsec_abc'], 2, /give its id with --key-id/],
    [['--url', url, '--key', 'a.b.c'], 2, /not a token/],
    [['--url', url, '--key', 'k', '--key-id', 'sbk_short'], 2, /--key-id must be a key id/],
    [['--url', url, '--key', 'k', '--org', 'acme'], 2, /--org must be an org id/],
    [['--url', url, '--key', 'k', '--valid-days', '0'], 2, /--valid-days must be an integer/],
    [['--url', url, '--key', 'k', '--what'], 2, /Unknown option '--what'/],
    [['--url', url, '--key', 'k'], 1, /could not reach http:\/\/127\.0\.0\.1:\d+: .*; nothing written/],
  ];
  for (const [args, code, message] of cases) {
    const result = await login(home, args);
    t.equal(result.code, code, `${args.join(' ')}: exit ${code}`);
    t.match(result.stderr, message);
    t.equal(result.stderr.trim().split('\n').length, 1, 'one line');
  }
  t.notOk(existsSync(join(home, '.smply')), 'nothing written');
});
