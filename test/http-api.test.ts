/**
 * HTTP APIs (wire-protocol §3.14): requests to /http-api/{orgId}/machines/{machine}/{slug} run the
 * current version's httpApiMapper in the sandbox, create or send through the normal paths, and answer
 * what its responseMapper makes of the settled state. A real node, a real client.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errors } from '@statebacked/client';
import t from 'tap';
import { fetchingMachine, ordersMachine, plainMachine } from './fixtures/http-api-machines.js';
import { call } from './helpers/http.js';
import { onlyEmbedded, startNode } from './helpers/node-process.js';
import { machineWithVersion } from './helpers/setup.js';
import { eventType } from './helpers/transitions.js';

// What an async handler fetches (allowed by --fetch-allow, as loopback is refused otherwise).
const upstream = createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ name: `fetched-${new URL(req.url ?? '/', 'http://x').searchParams.get('n')}` }));
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamPort = (upstream.address() as AddressInfo).port;
t.teardown(() => upstream.close());

// No stall watchdog: the spinning handler below must meet the CPU limit, not move the org to quarantine.
// The limit is measured on the clock (isolated-vm), so it is 1 s: at 300 ms a plain handler on a host
// busy with other work once met it.
const node = await startNode({
  args: ['--cpu-limit-ms', '1000', '--sandbox-stall-ms', '0', '--settle-timeout-ms', '2000', '--fetch-allow', `127.0.0.1:${upstreamPort}`],
});
t.teardown(() => node.stop());
const admin = node.adminKey as string;
const orgId = (await call(node.url, 'GET', '/orgs', { token: admin })).body.orgs[0].id as string;
const { operator } = await machineWithVersion(node, 'orders', ordersMachine);
await machineWithVersion(node, 'plain', plainMachine);
await operator.machines.create('versionless');

/**
 * A node with the default CPU limit and stall watchdog, and a rate of 1 request a second per org: the
 * rate test uses its first org, the watchdog test an org of its own.
 */
const limited = await startNode({ args: ['--http-api-requests-per-second', '1'] });
t.teardown(() => limited.stop());

const api = (slug: string, rest = '') => `/http-api/${orgId}/machines/orders/${slug}${rest}`;
const signed = { 'x-signature': 'good' };

t.test(
  'a JSON webhook creates the instance on its first request, then sends to it; the settled state maps to status, headers, body',
  async (t) => {
    const first = await call(node.url, 'POST', api('orders'), { body: { order: 'o1', item: 'apple', price: 3 }, headers: signed });
    t.equal(first.status, 202);
    t.equal(first.headers['x-order-state'], 'open');
    t.equal(first.headers['x-items'], '1', 'a number header value is sent as text; names are lower-cased');
    t.match(first.headers['x-request-id'], /^[^,]+$/, "one x-request-id, the node's: a mapper's is dropped");
    t.not(first.headers['x-request-id'], 'from-the-mapper');
    t.match(first.headers['content-type'], /^application\/json/);
    t.same(
      first.body,
      { state: 'open', total: 3, owner: 'webhook', result: null },
      'full context (owner from initialContext); not done: result null',
    );

    const second = await call(node.url, 'POST', api('orders'), { body: { order: 'o1', item: 'pear', price: 4 }, headers: signed });
    t.equal(second.status, 202);
    t.same(second.body, { state: 'open', total: 7, owner: 'webhook', result: null });

    const paid = await call(node.url, 'POST', api('orders'), { body: { order: 'o1', pay: true }, headers: signed });
    t.equal(paid.status, 201);
    t.same(
      paid.body,
      { state: 'paid', total: 7, owner: 'webhook', result: { receipt: 'r-7', via: 'PAY' } },
      'done: result is the final state data',
    );

    const history = await operator.machineInstances.listTransitions('orders', 'o1');
    t.same(
      history.transitions.map(eventType),
      ['xstate.init', 'ADD', 'ADD', 'PAY'],
      'created once, three events, through the normal paths',
    );
    const state = await operator.machineInstances.admin.get('orders', 'o1');
    t.equal(state.done, true);
  },
);

t.test('a form body reaches the handler as an object of strings', async (t) => {
  const res = await call(node.url, 'POST', api('orders'), {
    rawBody: 'order=o2&item=fig+jam&price=5',
    headers: { ...signed, 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(res.status, 202);
  t.same(res.body, { state: 'open', total: 5, owner: 'webhook', result: null });
  const state = await operator.machineInstances.admin.get('orders', 'o2');
  t.same((state.context as any).items, ['fig jam']);
});

t.test('what the handler is given: method, headers, query, body by content type; a text answer', async (t) => {
  const seen = async () => ((await operator.machineInstances.admin.get('orders', 'echo')).context as any).seen.at(-1);

  const get = await call(node.url, 'GET', api('echo', '?a=1&b=two&a=3'), { headers: { 'x-custom': 'yes' } });
  t.equal(get.status, 200);
  t.match(get.headers['content-type'], /^text\/plain/);
  t.equal(get.text, 'seen 1', 'a string body is sent as text');
  const got = await seen();
  t.equal(got.method, 'GET');
  t.same(got.query, { a: '3', b: 'two' }, 'query parameters (the last of repeated names)');
  t.equal(got.headers['x-custom'], 'yes', 'headers, lower-cased');
  t.equal(got.body, undefined, 'no body: undefined');

  await call(node.url, 'PUT', api('echo'), { rawBody: 'plain words', headers: { 'content-type': 'text/plain' } });
  t.equal((await seen()).body, 'plain words', 'text/*: a string');
  await call(node.url, 'PATCH', api('echo'), { body: [1, { two: 2 }] });
  t.same((await seen()).body, [1, { two: 2 }], 'JSON: parsed, arrays too');
  t.equal((await seen()).method, 'PATCH');
  const del = await call(node.url, 'DELETE', api('echo'));
  t.equal(del.text, 'seen 4');
  t.equal((await seen()).method, 'DELETE');
  await call(node.url, 'POST', api('echo'), { rawBody: Buffer.from('bytes'), headers: { 'content-type': 'application/octet-stream' } });
  t.equal((await seen()).body, 'bytes', 'another content type: the body as a string');

  const badJson = await call(node.url, 'POST', api('echo'), { rawBody: '{"a":', headers: { 'content-type': 'application/json' } });
  t.equal(badJson.status, 400);
  t.equal(badJson.body.code, 'invalid-parameter');

  const alias = await call(node.url, 'GET', `/http-apis/${orgId}/machines/orders/echo`);
  t.equal(alias.status, 200, '/http-apis/... is the same route');
  t.equal(alias.text, 'seen 6');
});

t.test('HEAD runs the handler like GET and answers without the body; OPTIONS is a CORS preflight', async (t) => {
  const head = await call(node.url, 'HEAD', api('echo'));
  t.equal(head.status, 200);
  t.equal(head.text, '');
  t.equal(head.headers['content-length'], String(Buffer.byteLength('seen 7')), 'the length the GET body would have');
  const seen = ((await operator.machineInstances.admin.get('orders', 'echo')).context as any).seen.at(-1);
  t.equal(seen.method, 'HEAD', 'the handler sees HEAD');

  const options = await call(node.url, 'OPTIONS', api('echo'), {
    headers: { origin: 'https://example.com', 'access-control-request-method': 'POST' },
  });
  t.equal(options.status, 204);
  t.match(options.headers['access-control-allow-methods'], /POST/);
  const after = ((await operator.machineInstances.admin.get('orders', 'echo')).context as any).seen.length;
  t.equal(after, 7, 'the handler did not run for OPTIONS');
});

t.test('async handler and responseMapper waiting for timers', async (t) => {
  const res = await call(node.url, 'POST', api('later'));
  t.equal(res.status, 200);
  t.same(res.body, { items: 1 });
});

t.test('an async handler that fetches before it answers', async (t) => {
  await machineWithVersion(node, 'fetching', fetchingMachine(upstreamPort));
  const res = await call(node.url, 'POST', `/http-api/${orgId}/machines/fetching/lookup?n=7`);
  t.equal(res.status, 200);
  t.same(res.body, { name: 'fetched-7', state: 'on' });
  const state = await operator.machineInstances.admin.get('fetching', 'fetched-7');
  t.equal(state.state, 'on', 'the instance named by what the fetch answered was created and sent to');
});

t.test('404: unknown org, machine, slug, no httpApiMapper, no current version', async (t) => {
  const cases: Array<[string, RegExp]> = [
    [`/http-api/org_AAAAAAAAAAAAAAAAAAAAAA/machines/orders/orders`, /org .* does not exist/],
    [`/http-api/not-an-org/machines/orders/orders`, /org .* does not exist/],
    [`/http-api/${orgId}/machines/nope/orders`, /machine nope does not exist/],
    [`/http-api/${orgId}/machines/bad%20name/orders`, /does not exist/],
    [api('nope'), /no http API nope.*no entry "nope"/],
    [api('constructor'), /no entry "constructor"/],
    [`/http-api/${orgId}/machines/plain/orders`, /exports no httpApiMapper/],
    [`/http-api/${orgId}/machines/versionless/orders`, /no current version/],
  ];
  for (const [path, message] of cases) {
    const res = await call(node.url, 'POST', path, { body: {} });
    t.equal(res.status, 404, path);
    t.equal(res.body.code, 'not-found', path);
    t.match(res.body.error, message, path);
  }
});

t.test('400: the handler throws, returns an invalid shape, is missing, or runs past the CPU limit', async (t) => {
  const threw = await call(node.url, 'POST', api('orders'), {
    body: { order: 'o3', item: 'a', price: 1 },
    headers: { 'x-signature': 'forged' },
  });
  t.equal(threw.status, 400);
  t.equal(threw.body.code, 'machine-code-error');
  t.match(threw.body.error, /handler failed: Error: bad signature/);
  await t.rejects(operator.machineInstances.admin.get('orders', 'o3'), errors.NotFoundError, 'nothing created');

  for (const [slug, message] of [
    ['no-name', /machineInstanceName/],
    ['bad-event', /event must be/],
    ['no-handler', /handler is not a function/],
    ['never', /nothing of it can settle/],
    ['spin', /CPU time limit/],
  ] as const) {
    const res = await call(node.url, 'POST', api(slug));
    t.equal(res.status, 400, slug);
    t.equal(res.body.code, 'machine-code-error', slug);
    t.match(res.body.error, message, slug);
  }
  const after = await call(node.url, 'POST', api('echo'));
  t.equal(after.status, 200, 'the version still answers after a call cut by the CPU limit');
  for (const type of ['xstate.after(1000)#orders.open', 'done.invoke.pay', 'statebacked.upgrade', 'error.execution']) {
    const passed = await call(node.url, 'POST', api('pass-on', `?type=${encodeURIComponent(type)}`));
    t.equal(passed.status, 400, `a handler passing on ${type}`);
    t.match(passed.body, { code: 'machine-code-error', error: /the runtime's own/ });
  }
  t.equal((await call(node.url, 'POST', api('pass-on', '?type=ADD'))).status, 200, 'an ordinary type passes');
  // (xstate 4 would act on the name of an event shaped as its own wrapped ones, not on its type)
  const wrapped = await call(node.url, 'POST', api('pass-on-body'), { body: { type: 'ADD', $$type: 'scxml', name: 'done.invoke.pay' } });
  t.equal(wrapped.status, 400, "a handler passing on its caller's body shaped as xstate 4 wraps its own events");
  t.match(wrapped.body, { code: 'machine-code-error', error: /\$\$type "scxml"/ });
  // (the caller's body is parsed as JSON: a key __proto__ stays a key, until plain assignment copies it)
  const proto = await call(node.url, 'POST', api('pass-on-body'), {
    rawBody: '{"type":"ADD","__proto__":{"item":"x"}}',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(proto.status, 400, "a handler passing on its caller's body with a key __proto__");
  t.match(proto.body, { code: 'machine-code-error', error: /a key named __proto__/ });
});

t.test('404: the instance is missing and the handler gave no initialContext', async (t) => {
  const res = await call(node.url, 'POST', api('orders', '?create=no'), { body: { order: 'o4', item: 'a', price: 1 }, headers: signed });
  t.equal(res.status, 404);
  t.match(res.body.error, /instance o4 of machine orders does not exist/);
  await t.rejects(operator.machineInstances.admin.get('orders', 'o4'), errors.NotFoundError);
});

t.test('403: allowWrite refuses the creation or the event', async (t) => {
  const creation = await call(node.url, 'POST', api('orders', '?owner=nobody'), {
    body: { order: 'o5', item: 'a', price: 1 },
    headers: signed,
  });
  t.equal(creation.status, 403);
  t.equal(creation.body.code, 'rejected-by-machine-authorizer');
  await t.rejects(operator.machineInstances.admin.get('orders', 'o5'), errors.NotFoundError, 'not created');

  const event = await call(node.url, 'POST', api('orders'), {
    body: { order: 'o2', item: 'b', price: 1 },
    headers: { ...signed, 'x-user': 'mallory' },
  });
  t.equal(event.status, 403);
  t.equal(event.body.code, 'rejected-by-machine-authorizer');
  const state = await operator.machineInstances.admin.get('orders', 'o2');
  t.same((state.context as any).items, ['fig jam'], 'the event was not applied');
});

t.test("a responseMapper's date is dropped: the node's own is the one sent", async (t) => {
  const res = await call(node.url, 'POST', api('mapper-date'));
  t.equal(res.status, 201);
  t.equal(res.headers['x-kept'], 'yes');
  t.not(res.headers.date, 'from the mapper');
  t.notMatch(res.headers.date, /from the mapper/, 'not beside it either');
});

t.test('a responseMapper that throws or answers something unusable: 200 {"ok":true}, the event applied', async (t) => {
  for (const slug of ['mapper-throws', 'mapper-invalid', 'mapper-many-headers', 'mapper-long-header']) {
    const res = await call(node.url, 'POST', api(slug));
    t.equal(res.status, 200, slug);
    t.same(res.body, { ok: true }, slug);
    t.equal(res.headers['x-evil'], undefined);
    t.equal(res.headers['set-cookie'], undefined);
    const state = await operator.machineInstances.admin.get('orders', slug);
    t.same((state.context as any).items, ['x'], `${slug}: the event was applied`);
  }
  // The caller sees only {"ok":true}: the instance's logs say why (written in batches, so poll).
  let lines: string[] = [];
  for (let i = 0; i < 40 && lines.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const logs = await call(node.url, 'GET', '/logs?from=2000-01-01T00:00:00.000Z&machine=orders&instance=mapper-throws', { token: admin });
    lines = (logs.body?.logs ?? []).map((entry: any) => JSON.stringify(entry));
  }
  t.match(lines.join('\n'), /responseMapper failed.*mapper bug/);
});

t.test('a body over 1 MiB: 413', async (t) => {
  const res = await call(node.url, 'POST', api('echo'), {
    rawBody: 'x'.repeat(1024 * 1024 + 1),
    headers: { 'content-type': 'text/plain' },
  });
  t.equal(res.status, 413);
  t.equal(res.body.code, 'payload-too-large');
});

t.test('429 past the per-org rate (--http-api-requests-per-second)', async (t) => {
  const limitedOrg = (await call(limited.url, 'GET', '/orgs', { token: limited.adminKey as string })).body.orgs[0].id as string;
  const path = `/http-api/${limitedOrg}/machines/none/x`;
  // The rate is each node's (in a cluster deployment: ask one of them).
  const one = limited.nodes?.[0]?.url ?? limited.url;
  // A burst of twice the rate passes the limit (and then finds no machine); the next is refused.
  t.equal((await call(one, 'POST', path)).status, 404);
  t.equal((await call(one, 'POST', path)).status, 404);
  const refused = await call(one, 'POST', path);
  t.equal(refused.status, 429);
  t.equal(refused.body.code, 'rate-limited');
  t.match(refused.body.error, /at most 1 requests a second/);
  const unknownOrg = await call(limited.url, 'POST', '/http-api/org_AAAAAAAAAAAAAAAAAAAAAA/machines/none/x');
  t.equal(unknownOrg.status, 404, 'an unknown org is not counted against anyone');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  t.equal((await call(limited.url, 'POST', path)).status, 404, 'a token back after a second');
});

t.test(
  'a handler that spins after it awaited a timer meets the stall watchdog, as other calls do',
  onlyEmbedded(
    'the watchdog is per node and shown on one: three nodes on two cores can starve the worker until its CPU limit, measured by the clock, ends the call before the watchdog sees 100 ms of CPU',
  ),
  async (t) => {
    // The default CPU limit (1 s, on the clock) leaves the watchdog (100 ms of CPU) time to act on a busy host.
    // (Its two requests are within its org's burst of 2.)
    const watched = limited;
    const watchedOrg = (await call(watched.url, 'POST', '/orgs', { token: watched.adminKey as string, body: { name: 'watched' } })).body
      .id as string;
    await machineWithVersion(watched, 'orders', ordersMachine, watchedOrg);
    const spun = await call(watched.url, 'POST', `/http-api/${watchedOrg}/machines/orders/late-spin`);
    t.equal(spun.status, 400);
    t.equal(spun.body.code, 'machine-code-error');
    t.match(spun.body.error, /held its sandbox worker|CPU time limit/);
    for (let i = 0; i < 40 && !/held the sandbox worker/.test(watched.output()); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    t.match(watched.output(), /held the sandbox worker/, 'the watchdog saw it (and moved the org to the quarantine worker)');
    const after = await call(watched.url, 'GET', `/http-api/${watchedOrg}/machines/orders/echo`);
    t.equal(after.status, 200, 'the org still answers, from the quarantine worker');
  },
);

t.test(
  'a handler that holds the worker past the stall limit and then awaits gets a 400, not a 503',
  onlyEmbedded('the watchdog is per node and shown on one (see above)'),
  async (t) => {
    // Before: the retired worker moved the handler on at its next crossing, and the call was run again
    // until it failed as 503 unavailable.
    // A long CPU limit: it is measured by the clock, and a retired worker runs at the lowest priority.
    const watched = await startNode({ args: ['--cpu-limit-ms', '8000'] });
    t.teardown(() => watched.stop());
    const watchedOrg = (await call(watched.url, 'GET', '/orgs', { token: watched.adminKey as string })).body.orgs[0].id as string;
    await machineWithVersion(watched, 'orders', ordersMachine);
    const held = await call(watched.url, 'POST', `/http-api/${watchedOrg}/machines/orders/heavy-then-wait`);
    t.equal(held.status, 400);
    t.equal(held.body.code, 'machine-code-error');
    // (or, on a host busy with other work, the spin meets its CPU limit in the retired worker, which runs
    // at the lowest priority with that limit on the clock: a 400 before the change too)
    t.match(
      held.body.error,
      /held its sandbox worker past the stall limit of 100 ms of CPU \(--sandbox-stall-ms\) and had more to run, which it could not do in the retired worker, on two attempts in a row|CPU time limit of 8000 ms/,
    );
    t.equal(
      (
        await call(watched.url, 'GET', `/machines/orders/i/heavy`, {
          token: watched.adminKey as string,
          headers: { 'x-statebacked-org-id': watchedOrg },
        })
      ).status,
      404,
      'no instance was made',
    );
    t.equal(
      (await call(watched.url, 'GET', `/http-api/${watchedOrg}/machines/orders/echo`)).status,
      200,
      'the org still answers, from the quarantine worker',
    );
  },
);
