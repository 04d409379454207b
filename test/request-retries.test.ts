import t from 'tap';
import { asRequestError, HeadMovedFailure, RequestRetries, WorkerCrashFailure } from '../src/runtime/request-retries.js';
import {
  MachineCodeError,
  SandboxCrashedError,
  SandboxDisposedError,
  SandboxMemoryError,
  SandboxMovedError,
} from '../src/sandbox/index.js';
import { SequenceConflictError } from '../src/store/instance-store.js';

/** When a request runs again after a failure that was not its own, alone: no server, no sandbox. */
const logger = () => {
  const lines: string[] = [];
  return {
    lines,
    info: (m: string) => void lines.push(`info ${m}`),
    warn: (m: string) => void lines.push(`warn ${m}`),
    error: (m: string) => void lines.push(`error ${m}`),
  };
};
const retriesWith = () => {
  const log = logger();
  const quarantined: string[] = [];
  const retries = new RequestRetries({ logger: log, quarantineVersion: (versionId) => (quarantined.push(versionId), { orgId: 'org_1' }) });
  return { retries, log, quarantined };
};
/** A task that fails with each of `failures` in turn, then answers how many runs it took. */
const failing = (...failures: Error[]) => {
  let runs = 0;
  return {
    task: async () => {
      const failure = failures[runs++];
      if (failure) throw failure;
      return runs;
    },
    runs: () => runs,
  };
};

t.test('a request that waited in a retired worker runs again, up to three runs in all', async (t) => {
  const { retries } = retriesWith();
  t.equal(await retries.untilNotMoved(failing(new SandboxMovedError(), new SandboxDisposedError()).task), 3);
  const again = failing(new SandboxMovedError(), new SandboxMovedError(), new SandboxMovedError());
  await t.rejects(retries.untilNotMoved(again.task), { name: 'SandboxMovedError' });
  t.equal(again.runs(), 3);
});

t.test(
  'a head that moved under its owner runs again up to three times; an isolate out of memory gets one more run, said in the log',
  async (t) => {
    const { retries, log } = retriesWith();
    t.equal(await retries.untilNotMoved(failing(new HeadMovedFailure()).task), 2);
    const moved = () => new HeadMovedFailure();
    t.equal(await retries.untilNotMoved(failing(moved(), moved(), moved()).task), 4, 'a handover can move it twice or three times');
    const racing = failing(moved(), moved(), moved(), moved());
    await t.rejects(retries.untilNotMoved(racing.task), { code: 'invalid-state', status: 409 });
    t.equal(racing.runs(), 4);
    const memory = asRequestError(new SandboxMemoryError(64), 'o/m/i', log) as Error;
    t.equal(await retries.untilNotMoved(failing(memory).task), 2);
    await t.rejects(retries.untilNotMoved(failing(memory, memory).task), { status: 400, code: 'machine-code-error' });
    t.match(log.lines, [/warn a request ran its machine version's isolate out of memory/, /warn/]);
  },
);

t.test('after a worker crash a request runs once more; a second crash of its own quarantines its version', async (t) => {
  const { retries, quarantined, log } = retriesWith();
  const crash = (outside: boolean) => asRequestError(new SandboxCrashedError({ reason: 'exit 1', outside }), 'o/m/i', log) as Error;
  t.type(crash(false), WorkerCrashFailure);
  t.equal(await retries.afterCrashOnceMore(failing(crash(false)).task, () => 'ver_a'), 2, 'a bystander runs once more and succeeds');
  t.same(quarantined, []);
  await t.rejects(
    retries.afterCrashOnceMore(failing(crash(false), crash(false)).task, () => 'ver_b'),
    { code: 'machine-code-error', status: 400 },
  );
  t.same(quarantined, ['ver_b'], "the culprit's version is quarantined");
  t.match(log.lines.at(-1), /machine version ver_b crashed its sandbox worker twice in a row.*org org_1/);
  await t.rejects(
    retries.afterCrashOnceMore(failing(crash(true), crash(true)).task, () => 'ver_c'),
    { code: 'unavailable', status: 503 },
  );
  t.same(quarantined, ['ver_b'], 'a worker killed from outside blames no version');
});

t.test('failures as the request sees them', async (t) => {
  const log = logger();
  t.match(asRequestError(new MachineCodeError('boom'), 'o/m/i', log), {
    status: 400,
    code: 'machine-code-error',
    message: 'machine code threw: boom',
  });
  t.type(asRequestError(new SequenceConflictError(3, 4), 'o/m/i', log), HeadMovedFailure);
  t.match(log.lines, [/warn instance head moved under its owner/]);
  const other = new Error('other');
  t.equal(asRequestError(other, 'o/m/i', log), other, 'anything else is passed on as it is');
});
