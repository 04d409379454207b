import { gzipSync } from 'node:zlib';
import { StateBackedClient } from '@statebacked/client';
import t from 'tap';
import { bundleLikeSmply } from './helpers/bundle.js';
import { startNode } from './helpers/node-process.js';

/**
 * A machine bundled the way smply 0.1.18 uploads it (wire-protocol §7.3): esbuild, bundle, browser
 * platform, ESM, minified with kept names, xstate bundled in, gzipped on upload.
 */
const source = `
import { createMachine, assign } from "xstate";
import { choose } from "xstate/lib/actions";
export default createMachine({
  id: "signup", predictableActionArguments: true, initial: "form",
  context: { attempts: 0, public: { step: "form" } },
  states: {
    form: { on: { SUBMIT: { target: "review", actions: assign({ attempts: (c) => c.attempts + 1, public: () => ({ step: "review" }) }) } } },
    review: {
      tags: ["pending"],
      on: {
        APPROVE: { target: "done", actions: assign({ public: () => ({ step: "done" }) }) },
        REJECT: { target: "form", actions: choose([{ cond: (c) => c.attempts > 1, actions: assign({ public: () => ({ step: "form-again" }) }) }]) },
      },
    },
    done: { type: "final" },
  },
});
export const allowRead = ({ machineInstanceName, authContext }) => authContext.sub === machineInstanceName || authContext.sub === undefined;
export const allowWrite = ({ machineInstanceName, authContext }) => authContext.sub === machineInstanceName || authContext.sub === undefined;
`;

t.test('a smply-style bundle with xstate inside runs end to end', async (t) => {
  const code = await bundleLikeSmply(source);
  t.notMatch(code, /from\s*["']xstate/, 'xstate is bundled in, not imported');
  t.ok(code.length > 20_000, `the bundle carries xstate (${code.length} bytes)`);

  const node = await startNode();
  t.teardown(() => node.stop());
  const client = new StateBackedClient(node.adminKey as string, { apiHost: node.url });
  await client.machines.create('signup');
  const { machineVersionId } = await client.machineVersions.create('signup', {
    clientInfo: 'smply-style',
    makeCurrent: true,
    gzippedCode: gzipSync(code),
  });
  t.match(machineVersionId, /^ver_/);
  t.equal((await client.machines.get('signup')).machine.currentVersion?.id, machineVersionId);

  t.match(await client.machineInstances.create('signup', { slug: 'u1' }), { state: 'form', publicContext: { step: 'form' } });
  t.match(await client.machineInstances.sendEvent('signup', 'u1', { event: 'SUBMIT' }), { state: 'review', tags: ['pending'] });
  await client.machineInstances.sendEvent('signup', 'u1', { event: 'REJECT' });
  await client.machineInstances.sendEvent('signup', 'u1', { event: 'SUBMIT' });
  t.match(
    await client.machineInstances.sendEvent('signup', 'u1', { event: 'REJECT' }),
    { state: 'form', publicContext: { step: 'form-again' } },
    'a bundled xstate/lib/actions helper works',
  );
  await client.machineInstances.sendEvent('signup', 'u1', { event: 'SUBMIT' });
  t.match(await client.machineInstances.sendEvent('signup', 'u1', { event: 'APPROVE' }), { state: 'done', done: true });
  const impersonated = new StateBackedClient(node.adminKey as string, { apiHost: node.url, actAs: { sub: 'someone-else' } });
  await t.rejects(
    impersonated.machineInstances.get('signup', 'u1'),
    { status: 403, code: 'rejected-by-machine-authorizer' },
    'the bundled authorizers run',
  );
});
