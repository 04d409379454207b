import type { FaultPoint } from '../runtime/instance-runtime.js';

/**
 * Test-only crash points. With STATEHOLD_TEST_FAULT=<point>, the process kills itself with SIGKILL the
 * first time it reaches that point, so tests can prove that messages between instances are neither
 * lost nor doubled by a crash between the sender's and the receiver's commits. Unset, it does nothing.
 */
export const faultHook = (env: NodeJS.ProcessEnv): ((point: FaultPoint) => void) | undefined => {
  const armed = env.STATEHOLD_TEST_FAULT;
  if (!armed) return undefined;
  return (point) => {
    if (point === armed) process.kill(process.pid, 'SIGKILL');
  };
};
