import t from 'tap';
import { MachineGate } from '../src/runtime/machine-gate.js';

/** Creating an instance and deleting its machine exclude each other (src/runtime/machine-gate.ts). */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

t.test('a create during a deletion of its machine waits for it, then goes on (the caller checks the machine is still there)', async (t) => {
  const gate = new MachineGate();
  let deleted = false;
  const deletion = gate.whileDeleting('org', 'm', async () => {
    await sleep(100);
    deleted = true;
    return 'deleted';
  });
  const started = Date.now();
  const leave = await gate.enterCreate('org', 'm');
  t.ok(deleted, 'the create went on after the deletion ended');
  t.ok(Date.now() - started >= 90, `after ${Date.now() - started} ms`);
  t.equal(await deletion, 'deleted');
  await t.rejects(
    gate.whileDeleting('org', 'm', async () => 'again'),
    { message: /machine m has an instance being created/ },
    'a deletion while the create runs is refused',
  );
  leave();
  t.equal(await gate.whileDeleting('org', 'm', async () => 'now'), 'now', 'and runs once it is over');
  const other = await gate.enterCreate('org', 'n');
  other();
  t.pass('another machine is not held up');
});

t.test(
  'a create during a deletion run by another node (its gate closed here) is a 409 that says to retry; one outlasting the wait here too',
  async (t) => {
    const gate = new MachineGate(200);
    gate.close('org', 'm', 10_000);
    await t.rejects(gate.enterCreate('org', 'm'), { message: /machine m is being deleted; retry if it still exists/ });
    gate.open('org', 'm');
    (await gate.enterCreate('org', 'm'))();
    t.pass('open again');
    gate.close('org', 'm', 30);
    await sleep(60);
    (await gate.enterCreate('org', 'm'))();
    t.pass('a gate whose node never opened it opens after its hold');
    const slow = gate.whileDeleting('org', 'm', () => sleep(400));
    const started = Date.now();
    await t.rejects(gate.enterCreate('org', 'm'), { message: /machine m is being deleted; retry if it still exists/ });
    t.ok(Date.now() - started >= 190, `a deletion here that outlasts the wait: after ${Date.now() - started} ms`);
    await slow;
  },
);
