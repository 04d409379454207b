/**
 * Runs a drop-in suite (test/<suite>.test.ts) against nodes started with `--sandbox inline` (machine
 * code in the node's own process, inline-worker.ts), as a test file of its own. The nodes the suite
 * starts inherit this process's environment (helpers/node-process.ts), so STATEHOLD_SANDBOX is set
 * before the suite is imported.
 */
export const runInline = async (suite: string): Promise<void> => {
  process.env.STATEHOLD_SANDBOX = 'inline';
  await import(`../${suite}.test.js`);
};
