import t from 'tap';
import { VersionIsolate } from '../src/sandbox/index.js';

/** The hot path builds allowWrite's request inside the isolate, from the live (committed) state. */
const code = `import { createMachine, assign } from "xstate";
export default createMachine({ id: "m", predictableActionArguments: true, initial: "a", context: { n: 0, public: { n: 0 } },
  states: { a: { on: { INC: { target: "b", actions: assign({ n: (c) => c.n + 1 }) } } }, b: { on: { INC: { target: "a", actions: assign({ n: (c) => c.n + 1 }) } } } } });
export const allowRead = () => true;
export const allowWrite = (request) => {
  console.log("request", request);
  if (request.type === "event") request.context.n = 1000;
  return request.type === "initialization" || request.event.type === "INC";
};`;

t.test('allowWrite gets the committed state, a copy of the context, the event and the caller', async (t) => {
  const vi = await VersionIsolate.load({
    versionId: 'v',
    code,
    onLog: (entry) => {
      if (entry.args[0] === 'request') seen.push(entry.args[1]);
    },
  });
  const seen: unknown[] = [];
  t.teardown(() => vi.dispose());
  vi.start('org/m/i', { context: {} });
  const caller = { machineInstanceName: 'i', authContext: { sub: 'u1' } };
  const stepped = vi.sendAuthorized('org/m/i', caller, { type: 'INC', by: 1 });
  t.not(stepped, 'rejected');
  t.same(seen[0], {
    type: 'event',
    machineInstanceName: 'i',
    state: 'a',
    context: { n: 0, public: { n: 0 } },
    event: { type: 'INC', by: 1 },
    authContext: { sub: 'u1' },
  });
  t.equal(stepped === 'rejected' ? -1 : stepped.context.n, 1, 'the authorizer mutated only its copy of the context');
  t.equal(vi.sendAuthorized('org/m/i', caller, { type: 'OTHER' }), 'rejected');
  const after = vi.sendAuthorized('org/m/i', caller, { type: 'INC' });
  t.match(after, { state: 'a', context: { n: 2 } }, 'a refused event left the actor as it was');
  t.match(seen.at(-1), { state: 'b', context: { n: 1 } }, 'the next request shows the state the refused event did not change');
});

t.test('an authorizer that answers anything but true refuses: an async one too (authorizers are called synchronously)', async (t) => {
  const vi = await VersionIsolate.load({
    versionId: 'v-async',
    code: `import { createMachine } from "xstate";
export default createMachine({ id: "m", predictableActionArguments: true, initial: "a", states: { a: {} } });
export const allowRead = async () => true;
export const allowWrite = (request) => request.type === "initialization" ? true : request.event.type === "ONE" ? 1 : Promise.resolve(true);`,
  });
  t.teardown(() => vi.dispose());
  vi.start('org/m/i', { context: {} });
  const caller = { machineInstanceName: 'i', authContext: { sub: 'u1' } };
  t.equal(vi.sendAuthorized('org/m/i', caller, { type: 'LATER' }), 'rejected', 'a Promise of true');
  t.equal(vi.sendAuthorized('org/m/i', caller, { type: 'ONE' }), 'rejected', 'a truthy value that is not true');
  t.equal(vi.allowRead({ machineInstanceName: 'i', state: 'a', context: {}, authContext: { sub: 'u1' } }), false, 'an async allowRead');
});
