/**
 * The web console in real headless Chromium (Debian's `chromium`, driven by playwright-core), against a
 * real `statehold serve`, as a new user goes through it: sign in (a wrong key first), the machines, a
 * machine's versions and instances (by name prefix and by an index query), an instance live over `/rt`
 * (a change made elsewhere shows without a reload), its statechart with the active states
 * highlighted, sending events, pause and resume, a refused desired version shown as the API words it,
 * deleting it, logs with live watch, keys (the secret shown once) and signing in with a key's id and
 * secret. No console errors other than the API answers the test provokes, no failed requests, no
 * request to anywhere but the node. Screenshots go to .tap/console-screenshots/.
 *
 * Skipped, with a line saying so, when Chromium is not installed (.ci/run installs it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { StateBackedClient } from '@statebacked/client';
import { type Browser, chromium, type Page } from 'playwright-core';
import t from 'tap';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/http.js';
import { natsMissing, startClusterNodes, startNats } from './helpers/nats.js';
import { startNode } from './helpers/node-process.js';
import { repoRoot } from './helpers/paths.js';
import { machineWithVersion } from './helpers/setup.js';

const findChromium = (): string | undefined => {
  if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  try {
    return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
};

const chromiumPath = findChromium();
const skip = chromiumPath ? false : 'Chromium is not installed (apt-get install chromium): the console browser tests were not run';
if (skip) t.comment(skip);

const screenshots = join(repoRoot, '.tap', 'console-screenshots');

const LAMP = (clientInfo: string) => `
import { createMachine, assign } from 'xstate';
export const allowRead = () => true;
export const allowWrite = () => true;
export default createMachine({ id: 'lamp', initial: 'off', predictableActionArguments: true,
  context: { owner: 'nobody', public: { flips: 0 } },
  states: {
    off: { tags: ['dark'], on: { TOGGLE: { target: 'on', actions: ['flip', 'say'] } } },
    on: { initial: 'dim', on: { TOGGLE: { target: 'off', actions: ['flip', 'say'] } },
      states: { dim: { on: { BRIGHTER: 'bright' } }, bright: { tags: ['glaring'] } } },
  } }, { actions: {
    flip: assign((ctx) => ({ public: { flips: ctx.public.flips + 1 } })),
    say: (ctx) => console.log('${clientInfo} flipped to ' + ctx.public.flips),
  } });`;

/** Every console error, page error and failed request the page had; API answers the test provokes are allowed while `expected` says so. */
interface Watch {
  problems: string[];
  expectApiErrors: boolean;
  requests: string[];
}

const watchPage = (page: Page): Watch => {
  const watch: Watch = { problems: [], expectApiErrors: false, requests: [] };
  page.on('console', (message) => {
    if (message.type() !== 'error' && message.type() !== 'warning') return;
    const text = message.text();
    if (watch.expectApiErrors && /^Failed to load resource: the server responded with a status of 4\d\d/.test(text)) return;
    watch.problems.push(`console ${message.type()}: ${text}`);
  });
  page.on('pageerror', (error) => watch.problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => watch.problems.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`));
  page.on('request', (request) => watch.requests.push(request.url()));
  return watch;
};

/** Waits until the table named `name` has `count` rows (a locator's count does not wait by itself). */
const rows = (page: Page, name: string, count: number) =>
  eventually(async () => (await page.getByRole('table', { name }).locator('tbody tr').count()) === count, {
    message: `the ${name} table did not get ${count} rows`,
  });

/** One browser for the file, launched on first use and closed when the file's tests end. */
let launched: Promise<Browser> | undefined;
const theBrowser = (): Promise<Browser> => {
  // (playwright gives the browser a fresh temporary profile of its own: no --user-data-dir)
  launched ??= chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return launched;
};
t.teardown(async () => {
  if (launched) await (await launched).close();
});

// The two tests share only the browser (each has its own context and node): they run side by side.
t.jobs = 2;

t.test('the console in headless Chromium, as a new user', { skip, timeout: 180_000 }, async (t) => {
  mkdirSync(screenshots, { recursive: true });
  t.comment(`screenshots: ${screenshots}`);
  const node = await startNode();
  t.teardown(() => node.stop());
  const admin = node.adminKey as string;
  const { operator } = await machineWithVersion(node, 'lamp', LAMP('lamp-v1'));
  for (const slug of ['kitchen', 'hall', 'hall-2']) await operator.machineInstances.create('lamp', { slug, context: { owner: slug } });
  // A machine with an index, its version's selector naming the owner.
  t.equal((await call(node.url, 'POST', '/machines', { token: admin, body: { slug: 'owned', indexes: ['owner'] } })).status, 201);
  const provisional = (await call(node.url, 'POST', '/machines/owned/v', { token: admin })).body;
  const form = new FormData();
  for (const [k, v] of Object.entries(provisional.codeUploadFields as Record<string, string>)) form.append(k, v);
  form.append('file', new Blob([LAMP('owned-v1')]), 'owned.js');
  t.equal((await fetch(provisional.codeUploadUrl, { method: 'POST', body: form })).status, 204);
  const finalized = await call(node.url, 'PUT', `/machines/owned/v/${provisional.machineVersionId}`, {
    token: admin,
    body: { clientInfo: 'owned-v1', makeCurrent: true, indexSelectors: { owner: '$.owner' } },
  });
  t.equal(finalized.status, 200);
  for (const owner of ['alice', 'bob']) await operator.machineInstances.create('owned', { slug: `of-${owner}`, context: { owner } });

  const browser = await theBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const watch = watchPage(page);
  const shot = (name: string) => page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
  const stateValue = page.getByTestId('state-value');

  await t.test('sign in: a wrong key is refused with the API own words, the operator key lets in', async (t) => {
    await page.goto(`${node.url}/console`);
    await page.getByRole('heading', { name: 'Statehold console' }).waitFor();
    await shot('01-sign-in');
    watch.expectApiErrors = true;
    await page.getByLabel('Operator key or State Backed token').fill('not-the-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    const wrong = await call(node.url, 'GET', '/machines', { token: 'not-the-key' });
    t.match(await refusal.textContent(), wrong.body.error, 'the error is the API answer');
    t.match(await refusal.textContent(), `${wrong.status} ${wrong.body.code}`);
    watch.expectApiErrors = false;
    await page.getByLabel('Operator key or State Backed token').fill(admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Machines' }).waitFor();
    t.equal(await page.evaluate('sessionStorage.length'), 1, 'the credential is in session storage');
    t.equal(await page.evaluate('localStorage.length'), 0, 'and not in local storage');
    await page.getByRole('link', { name: 'lamp', exact: true }).waitFor();
    t.ok(await page.getByRole('table', { name: 'machines' }).getByText('lamp-v1').isVisible(), 'the current version is shown');
    await shot('02-machines');
  });

  await t.test('a machine: versions (which is current), instances by name prefix and by an index query', async (t) => {
    await page.getByRole('link', { name: 'lamp', exact: true }).click();
    await page.getByRole('heading', { name: 'lamp', exact: true }).waitFor();
    const versions = page.getByRole('table', { name: 'versions' });
    await versions.getByText('current').waitFor();
    t.ok(await versions.getByText('lamp-v1').isVisible());
    const instances = page.getByRole('table', { name: 'instances' });
    await instances.getByRole('link', { name: 'kitchen' }).waitFor();
    t.equal(await instances.locator('tbody tr').count(), 3);
    await page.getByPlaceholder('name starts with…').fill('hall');
    await page.getByRole('button', { name: 'Find' }).click();
    await rows(page, 'instances', 2);
    t.same(await instances.locator('tbody tr td:first-child').allTextContents(), ['hall', 'hall-2']);
    await shot('03-machine');

    await page.goto(`${node.url}/console/#/machines/owned`);
    await page.getByRole('heading', { name: 'owned', exact: true }).waitFor();
    await page.getByLabel('Find by').selectOption('index');
    await page.locator('select[name="op"]').selectOption('eq');
    await page.getByPlaceholder('value').fill('bob');
    await page.getByRole('button', { name: 'Find' }).click();
    // (the listing before the query shows of-bob too: wait for the query's one row, not for that text)
    await rows(page, 'instances', 1);
    t.same(await instances.locator('tbody tr').allTextContents(), ['of-bobbob']);
  });

  await t.test('an instance: created from the console, live over /rt, its statechart highlighted', async (t) => {
    await page.goto(`${node.url}/console/#/machines/lamp`);
    await page.getByText('Create an instance').click();
    await page.getByLabel('Name', { exact: true }).fill('desk');
    await page.getByLabel('Initial context (JSON)').fill('{"owner": "carol"}');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByRole('heading', { name: /desk/ }).waitFor();
    await page.locator('[data-live="live"]').waitFor();
    await stateValue.filter({ hasText: '"off"' }).waitFor();
    await page.locator('svg.statechart [data-state-id="lamp.off"][data-active="true"]').waitFor();
    t.equal(await page.locator('svg.statechart [data-active="true"]').count(), 2, 'the root and off');
    t.ok(await page.getByLabel('full context').getByText('"carol"').isVisible(), 'the full context');
    await page.evaluate('window.marker = 1');

    // A change made elsewhere (another client) shows without a reload.
    const sent = await call(node.url, 'POST', '/machines/lamp/i/desk/events', { token: admin, body: { event: 'TOGGLE' } });
    t.same(sent.body.state, { on: 'dim' });
    await stateValue.filter({ hasText: '{"on":"dim"}' }).waitFor();
    await page.locator('svg.statechart [data-state-id="lamp.on.dim"][data-active="true"]').waitFor();
    t.equal(await page.locator('svg.statechart [data-state-id="lamp.off"]').getAttribute('data-active'), 'false');
    await page.getByLabel('public context').getByText('"flips": 1').waitFor();

    // And one sent from the page.
    await page.getByLabel('Event type').fill('BRIGHTER');
    await page.getByRole('button', { name: 'Send event' }).click();
    await stateValue.filter({ hasText: '{"on":"bright"}' }).waitFor();
    await page.locator('svg.statechart [data-state-id="lamp.on.bright"][data-active="true"]').waitFor();
    await page.getByText('glaring').first().waitFor();
    const history = page.getByRole('table', { name: 'transitions' });
    await rows(page, 'transitions', 3);
    t.match(await history.locator('tbody').textContent(), /BRIGHTER/);
    t.equal(await page.evaluate('window.marker'), 1, 'no reload');
    await shot('04-instance');
  });

  await t.test('pause and resume; a refused event and a refused desired version, as the API words them', async (t) => {
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByTestId('status').filter({ hasText: 'paused' }).waitFor();
    watch.expectApiErrors = true;
    await page.getByLabel('Event type').fill('TOGGLE');
    await page.getByRole('button', { name: 'Send event' }).click();
    const refused = await call(node.url, 'POST', '/machines/lamp/i/desk/events', { token: admin, body: { event: 'TOGGLE' } });
    t.equal(refused.status, 409);
    await page.getByRole('alert').filter({ hasText: refused.body.error }).waitFor();
    t.match(await page.getByRole('alert').textContent(), `409 ${refused.body.code}`);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByTestId('status').filter({ hasText: 'running' }).waitFor();

    // A second version without a migration to it.
    const v2 = await operator.machineVersions.create('lamp', { clientInfo: 'lamp-v2', code: LAMP('lamp-v2') });
    await page.reload();
    await page.locator('select[name="targetVersion"]').selectOption(v2.machineVersionId);
    await page.getByRole('button', { name: 'Set desired version' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'no chain of migrations' });
    await alert.waitFor();
    t.match(await alert.textContent(), '400 no-migration-path');
    watch.expectApiErrors = false;
    await shot('05-instance-refused');
  });

  await t.test('delete, with the confirmation the page computes', async (t) => {
    await page.getByRole('button', { name: 'Delete…' }).click();
    const confirm = page.getByRole('button', { name: 'Delete for good' });
    t.ok(await confirm.isDisabled(), 'not until the name is typed');
    await page.locator('input[name="confirmName"]').fill('desk');
    await confirm.click();
    await page.getByRole('heading', { name: 'lamp', exact: true }).waitFor();
    t.equal((await call(node.url, 'GET', '/machines/lamp/i/desk/admin', { token: admin })).status, 404);
  });

  await t.test('logs of a machine, with live watch', async (t) => {
    await page.getByRole('link', { name: 'Logs of this machine' }).click();
    await page.getByRole('heading', { name: 'Logs' }).waitFor();
    await page.getByRole('table', { name: 'logs' }).getByText('lamp-v1 flipped to 1').waitFor();
    await page.getByLabel('Watch live').check();
    await operator.machineInstances.sendEvent('lamp', 'kitchen', { event: 'TOGGLE' });
    await page.getByRole('table', { name: 'logs' }).getByText('lamp-v1 flipped to 1').nth(1).waitFor({ timeout: 20_000 });
    t.equal(await page.getByRole('table', { name: 'logs' }).getByText('kitchen').count(), 1);
    await shot('06-logs');
  });

  let created = '';
  await t.test('keys: create (the secret shown once), list, delete', async (t) => {
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('heading', { name: 'Keys', exact: true }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('console-ci');
    await page.getByRole('radio', { name: /ci \(machines/ }).check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.getByTestId('new-secret');
    await secret.waitFor();
    t.match(await secret.textContent(), /^sbsec_/);
    created = (await secret.textContent()) ?? '';
    await shot('07-keys');
    const keys = (await call(node.url, 'GET', '/keys', { token: admin })).body.keys as Array<{ id: string; name: string }>;
    const key = keys.find((k) => k.name === 'console-ci');
    t.ok(key);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    t.equal(await secret.count(), 0, 'the secret is gone from the page');
    created = `${key?.id} ${created}`;

    // Another key, deleted from the page.
    await page.getByLabel('Name', { exact: true }).fill('short-lived');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('button', { name: 'delete key short-lived' }).click();
    await page.getByRole('button', { name: 'Delete short-lived for good' }).click();
    await page.getByRole('table', { name: 'keys' }).getByText('short-lived', { exact: true }).waitFor({ state: 'detached' });
    const left = (await call(node.url, 'GET', '/keys', { token: admin })).body.keys as Array<{ name: string }>;
    t.notOk(
      left.some((k) => k.name === 'short-lived'),
      'deleted',
    );
  });

  await t.test('the cluster page on a single node says so, as the API words it', async (t) => {
    watch.expectApiErrors = true;
    await page.getByRole('link', { name: 'Cluster' }).click();
    const answer = await call(node.url, 'GET', '/cluster', { token: admin });
    await page.getByRole('alert').filter({ hasText: answer.body.error }).waitFor();
    watch.expectApiErrors = false;
    t.pass('shown');
  });

  await t.test("sign out, then in with a key's id and secret (a token signed in the page)", async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    t.equal(await page.evaluate('sessionStorage.length'), 0, 'the credential is gone');
    await page.getByRole('tab', { name: 'Key id and secret' }).click();
    const [keyId, secret] = created.split(' ');
    await page.getByLabel('Key id').fill(keyId ?? '');
    await page.getByLabel('Secret').fill(secret ?? '');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'lamp', exact: true }).waitFor();
    t.equal(await page.getByRole('link', { name: 'Cluster' }).count(), 0, 'a key token is not the operator');
    await shot('08-key-sign-in');
  });

  t.same(watch.problems, [], 'no console errors, page errors or failed requests');
  const origin = new URL(node.url).origin;
  t.same(
    watch.requests.filter((url) => !url.startsWith(origin) && !url.startsWith(origin.replace('http', 'ws')) && !url.startsWith('data:')),
    [],
    'every request went to the node',
  );
  await context.close();
});

t.test(
  'the cluster page on a 2-node cluster: members, log positions, who owns an instance',
  { skip: skip || natsMissing(), timeout: 180_000 },
  async (t) => {
    const nats = await startNats(1);
    t.teardown(() => nats.stop());
    const adminKey = `test-admin-${Math.random().toString(36).slice(2)}`;
    const [first, second] = await startClusterNodes(t, nats, ['c1', 'c2'], { adminKey });
    if (!first || !second) throw new Error('the cluster did not start');
    for (const node of [first, second]) {
      await eventually(async () => (await call(node.url, 'GET', '/health')).status === 200, { message: `${node.url} is not ready` });
    }
    const operator = new StateBackedClient(adminKey, { apiHost: first.url });
    await operator.machines.create('lamp');
    await operator.machineVersions.create('lamp', { clientInfo: 'lamp-v1', makeCurrent: true, code: LAMP('lamp-v1') });
    await operator.machineInstances.create('lamp', { slug: 'porch' });
    const orgId = ((await call(first.url, 'GET', '/orgs', { token: adminKey })).body.orgs as Array<{ id: string }>)[0]?.id;
    const owner = (await call(first.url, 'GET', `/cluster?instance=${orgId}/lamp/porch`, { token: adminKey })).body.instance
      .owner as string;
    t.ok(owner === 'c1' || owner === 'c2', `owned by ${owner}`);

    const context = await (await theBrowser()).newContext({ viewport: { width: 1280, height: 900 } });
    t.teardown(() => context.close());
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    const watch = watchPage(page);
    // Through the node that does not own it: the page asks that node, which forwards.
    const via = owner === 'c1' ? second : first;
    await page.goto(`${via.url}/console/`);
    await page.getByLabel('Operator key or State Backed token').fill(adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Cluster' }).click();
    await page
      .getByTestId('node-id')
      .filter({ hasText: owner === 'c1' ? 'c2' : 'c1' })
      .waitFor();
    const members = page.getByRole('table', { name: 'members' });
    await rows(page, 'members', 2);
    t.match(await members.textContent(), /c1/);
    t.match(await members.textContent(), /c2/);
    t.ok(Number(await page.getByTestId('meta-seq').textContent()) > 0, 'the META log position');
    await page.getByPlaceholder('org_.../machine/instance').fill(`${orgId}/lamp/porch`);
    await page.getByRole('button', { name: 'Find owner' }).click();
    await page.getByTestId('owner-answer').filter({ hasText: owner }).waitFor();
    await page.screenshot({ path: join(screenshots, '09-cluster.png'), fullPage: true });

    // The instance page, live through the other node, names its owner and draws its statechart.
    await page.goto(`${via.url}/console/#/machines/lamp/i/porch`);
    await page.getByTestId('owner').filter({ hasText: owner }).waitFor();
    await page.locator('svg.statechart [data-state-id="lamp.off"][data-active="true"]').waitFor();
    await page.locator('[data-live="live"]').waitFor();
    await operator.machineInstances.sendEvent('lamp', 'porch', { event: 'TOGGLE' });
    await page.locator('svg.statechart [data-state-id="lamp.on.dim"][data-active="true"]').waitFor();
    await page.screenshot({ path: join(screenshots, '10-cluster-instance.png'), fullPage: true });
    t.same(watch.problems, [], 'no console errors, page errors or failed requests');
  },
);
