import { errors, StateBackedClient } from '@statebacked/client';
import { signToken } from '@statebacked/token';
import t from 'tap';
import { startNode } from './helpers/node-process.js';

/** What a new user does first: the real client with the operator key, then a token from a ci key. */
const node = await startNode({ generatedAdminKey: true });
t.teardown(() => node.stop());
// serve makes the operator key and prints it once; a cluster deployment's nodes are given one.
const operatorKey = (/shown only this once: (shadm_[A-Za-z0-9_-]+)/.exec(node.output())?.[1] ?? node.adminKey) as string;

t.test('operator: list orgs, create production and ci keys', async (t) => {
  const operator = new StateBackedClient(operatorKey, { apiHost: node.url });
  const { orgs } = await operator.orgs.list();
  t.equal(orgs.length, 1);
  const production = await operator.keys.create({ name: 'production', use: 'production' });
  t.match(production, { id: /^sbk_/, key: /^sbsec_/ });
  const ci = await operator.keys.create({ name: 'ci', use: 'ci' });
  const listed = await operator.keys.list();
  // (the org allows anonymous access, so it also has that key: wire-protocol §4.2)
  t.same(listed.keys.map((k) => k.name).sort(), ['anonymous access', 'ci', 'production']);
  t.same((await operator.billing.get()).url, `${node.url}/billing-portal`);

  const second = await operator.orgs.create({ name: 'second' });
  t.match(second, { id: /^org_/ });
  await t.rejects(operator.machines.list(), errors.OrgHeaderRequiredError, 'several orgs: the client surfaces specify-org');
  const scoped = new StateBackedClient(operatorKey, { apiHost: node.url, orgId: orgs[0]?.id });
  t.same(await scoped.machines.list(), { machines: [] });

  t.test('ci token from @statebacked/token: create, list, read, delete machines', async (t) => {
    const token = await signToken({ stateBackedKeyId: ci.id, stateBackedSecretKey: ci.key }, { sub: 'ci-bot' }, { expires: { in: '1h' } });
    const client = new StateBackedClient(token, { apiHost: node.url });
    await client.machines.create('orders');
    await client.machines.create('carts');
    await t.rejects(client.machines.create('orders'), errors.ConflictError);
    await t.rejects(client.machines.create('bad name'), errors.ClientError);
    const { machines } = await client.machines.list();
    t.same(
      machines.map((m) => m.slug),
      ['carts', 'orders'],
    );
    const got = await client.machines.get('orders');
    t.match(got, { machine: { createdAt: String, indexes: [] } });
    await t.rejects(client.machines.get('missing'), errors.NotFoundError);
    const prodToken = await signToken(
      { stateBackedKeyId: production.id, stateBackedSecretKey: production.key },
      { sub: 'u' },
      { expires: { in: '1h' } },
    );
    const prod = new StateBackedClient(prodToken, { apiHost: node.url });
    await t.rejects(
      prod.machines.dangerously.delete('carts', { dangerDataWillBeDeletedForever: true }),
      errors.MissingScopeError,
      'production keys cannot delete machines',
    );
    await t.rejects(prod.machines.list(), errors.MissingScopeError);
    await client.machines.dangerously.delete('carts', { dangerDataWillBeDeletedForever: true });
    t.same(
      (await client.machines.list()).machines.map((m) => m.slug),
      ['orders'],
      'the ci token deleted a machine',
    );
    await t.rejects(client.keys.list(), errors.MissingScopeError);

    await scoped.keys.delete(ci.id);
    await t.rejects(client.machines.list(), errors.UnauthorizedError, 'a deleted key stops working at once');
  });
});
